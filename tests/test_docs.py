"""The commands the docs give are the ones CI runs, the README's example runs and gives default.qubit's numbers,
the docs' links lead somewhere, and every command's --help says what each option does."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from qbackends.cli import LIST_WIDTH, build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def _first_block(language: str) -> str:
    block = re.search(rf"^```{language}\n(.*?)^```$", (ROOT / "README.md").read_text(), re.S | re.M)
    assert block, f"README.md lost its ```{language} block"
    return block.group(1)


def readme_commands() -> list[str]:
    """The lines .ci/run executes: the first ```bash block of README.md, comments aside."""
    return [line for line in _first_block("bash").splitlines() if line.strip() and not line.startswith("#")]


def test_ci_runs_the_readme_block_line_by_line():
    script = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv" in script and "pip install --upgrade pip" not in script  # the venv's own pip
    shown = subprocess.run(
        ["awk", r"/^```bash$/ {inside = 1; next} /^```$/ {if (inside) exit} inside", "README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [line for line in shown.splitlines() if line and not line.startswith("#")] == readme_commands()
    assert re.search(r"awk '/\^```bash\$/ \{inside = 1; next\} /\^```\$/ \{if \(inside\) exit\} inside' README.md", script)


def test_readme_installs_then_tests():
    install, test = readme_commands()
    assert install.startswith("pip install torch==2.13.0 && ") and install.endswith("qbackends run qaoa")
    # the plugins need qbackends: installed after it, never in the same pip command
    assert (
        'pip install -e ".[test,plot,qnn,mpi,native]" && pip install --no-build-isolation ./native && pip install ./plugins/*'
        in install
    )
    assert test == "pip install ./tests/plugin_fixtures/* && python -m pytest tests plugins -q -n 2 --dist worksteal"


def _contributing_setup() -> str:
    return (ROOT / "CONTRIBUTING.md").read_text().split("## Set up", 1)[1].split("\n## ", 1)[0]


def test_contributing_sets_up_with_the_readme_commands():
    installs = [line.strip() for line in _contributing_setup().splitlines() if "pip install" in line]
    assert installs == readme_commands()


def test_contributing_says_what_each_piece_of_the_ci_commands_is_for():
    """CI's contract lives in CONTRIBUTING.md, beside the commands; the README keeps the commands and a link."""
    contract = _contributing_setup().split("### CI's contract", 1)[1]
    install, test = readme_commands()
    for piece in ("torch==2.13.0", "./native", "--no-build-isolation", "qbackends run qaoa"):
        assert piece in install and f"`{piece}`" in contract, piece
    for extra in ("qnn", "mpi", "native"):  # the extras that bring something beyond Python packages
        assert f"{extra}," in install or f"{extra}]" in install
        assert f"`[{extra}]`" in contract, extra
    assert "plugins are installed after the project" in contract and "tests/plugin_fixtures/" in contract
    assert "tests/plugin_fixtures" in test and "`.ci/run`" in contract and "-m slow" in contract
    assert "CONTRIBUTING.md#set-up" in (ROOT / "README.md").read_text()


def test_readme_leads_with_the_task():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 120
    sections = re.findall(r"^## (.+)$", readme, re.M)
    assert sections[:3] == ["Install", "A first circuit", "What runs here"], sections
    assert "qbackends list" in readme and "| `local:pennylane/lightning.qubit` |" in readme


def test_every_link_in_the_docs_leads_to_a_file():
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken
    assert "(benchmarks-history.md)" in (ROOT / "docs" / "benchmarks.md").read_text()


def _printed(code: str, cwd: Path) -> tuple[float, list[float], str]:
    """What the README's example prints: the energy, its gradient, the backend that ran it."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    match = re.fullmatch(r"(\S+) (\[.*\]) (\S+)", done.stdout.strip())
    assert match, done.stdout
    return float(match.group(1)), json.loads(match.group(2)), match.group(3)


def test_the_readme_example_runs_and_gives_default_qubits_numbers(tmp_path):
    """The README's first circuit, run as a user runs it (the test venv's python, a new process), prints the
    numbers default.qubit gives for the same circuit, and names the backend auto took."""
    code = _first_block("python")
    auto_device = 'get_device("auto", wires=4)'
    assert code.count(auto_device) == 1 and len(code.splitlines()) <= 25
    value, gradient, taken = _printed(code, tmp_path)
    reference = code.replace(auto_device, 'qml.device("default.qubit", wires=4)').replace("dev.last_choice", '"default.qubit"')
    expected_value, expected_gradient, _ = _printed(reference, tmp_path)
    assert abs(value - expected_value) < 1e-10, (value, expected_value)
    assert len(gradient) == len(expected_gradient) == 4
    assert all(abs(g - e) < 1e-10 for g, e in zip(gradient, expected_gradient, strict=True)), (gradient, expected_gradient)
    assert all(abs(e) > 1e-3 for e in expected_gradient)  # a gradient that says something
    assert taken.startswith("local:"), taken  # dev.last_choice: a device string


def _parsers(parser: argparse.ArgumentParser, name: str = "qbackends"):
    yield name, parser
    for action in parser._actions:  # argparse offers no public walk of sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _parsers(child, f"{name} {sub}")


def test_every_option_of_every_command_has_help_and_shows_its_default():
    missing, no_default = [], []
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            if not action.help:
                missing.append(f"{name} {action.option_strings[0]}")
            text = parser.format_help()
            if action.default not in (None, False, [], argparse.SUPPRESS) and f"(default: {action.default})" not in " ".join(
                text.split()
            ):
                no_default.append(f"{name} {action.option_strings[0]}")
    assert not missing, f"options without help: {missing}"
    assert not no_default, f"options whose --help hides the default: {no_default}"


def test_list_fits_the_terminal_width(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= LIST_WIDTH
    assert lines[0].split() == ["backend", "installed", "max", "qubits", "runs", "here", "hardware,", "or", "why", "not"]


@pytest.mark.parametrize("command", [["run", "qaoa"], ["run", "qnn"], ["job", "run"], ["calibrate"], ["probe"]])
def test_help_is_a_sentence_per_option(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    out = capsys.readouterr().out
    assert "options:" in out and "(default: None)" not in out
