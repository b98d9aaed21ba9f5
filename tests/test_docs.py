"""The commands the docs give are the ones CI runs, and every command's --help says what each option does."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

from qbackends.cli import LIST_WIDTH, build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    """The lines .ci/run executes: the first ```bash block of README.md, comments aside."""
    block = re.search(r"^```bash\n(.*?)^```$", (ROOT / "README.md").read_text(), re.S | re.M)
    assert block, "README.md lost its ```bash block of install and test commands"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


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
    assert test == "pip install ./tests/plugin_fixtures/* && python -m pytest tests plugins -q"


def test_contributing_sets_up_with_the_readme_commands():
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    setup = contributing.split("## Set up", 1)[1].split("\n## ", 1)[0]
    installs = [line.strip() for line in setup.splitlines() if "pip install" in line]
    assert installs == readme_commands()


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
