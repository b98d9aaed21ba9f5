"""The ``qbackends`` command's arguments, every sub-command and option (the parser's own help names them), run in
this process in a folder holding a user's files: one typed line (exit 2) or success, nothing changed outside the
folders the command writes."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from qbackends.capabilities import DIFF_METHODS

from . import budget
from .sandbox import check_files, check_outcome, run, sandbox, snapshot
from .strategies import env_text, mostly

SAMPLE = Path(__file__).parent.parent / "data" / "bench-sample.json"
FILES = {  # made in the working folder before each command, beside the user's own
    "in/graph.txt": b"0 1\n1 2\n2 3 0.5\n",
    "in/bad-graph.txt": b"0 0\n",
    "in/data.csv": b"\xef\xbb\xbf0.1,0.2,M\r\n0.3,0.1,R\r\n0.2,0.4,M\r\n0.5,0.5,R\r\n0.1,0.9,M\r\n0.7,0.3,R\r\n0.6,0.2,M\r\n0.4,0.8,R\r\n",
    "in/bad.csv": b"1,2,X\n",
    "in/prices.toml": b'[prices."local:pennylane/lightning.qubit"]\nper_minute = 0.01\n',
    "in/junk.json": b"\x00\xff{",
    "in/hp.json": b'{"layers": 1}',
}


def _ints(valid, refused):
    return mostly(st.sampled_from(valid), st.sampled_from(refused) | env_text, 8).map(str)


cheap = ["lightning.qubit", "default.qubit", "local:pennylane/default.qubit"]
devices = mostly(
    st.sampled_from([*cheap, "auto", "local:braket/braket.local.qubit", "fused.qubit"]),
    st.sampled_from(["nosuch", "local:x/y", "arn:aws:braket:::device/x", "lightning.gpu", "a b"]),
    8,
)
folders = st.sampled_from(["out", "out/deep", "mine", "mine/notes.txt", "results", "in/graph.txt", "."])
methods = mostly(
    st.sampled_from(["adjoint", "parameter-shift", "backprop", "best", "hadamard", "device"]),
    st.sampled_from([*DIFF_METHODS, "adjoin", ""]),
    8,
)
floats = st.sampled_from(["0.1", "0.03", "1", "0", "-1", "nan", "inf", "1e-3", "x", "2"])
QAOA = {
    "--device": devices,
    "--nodes": _ints([2, 3, 4], [-1, 0, 1, 41, 10**9]),
    "--edges": _ints([1, 2, 3, 4], [0, -2, 10**6]),
    "--seed": _ints([0, 7], [-1, 2**32]),
    "--graph": st.sampled_from(["in/graph.txt", "in/bad-graph.txt", "missing.txt", "mine"]),
    "--layers": _ints([1, 2], [0, -1, 1001]),
    "--iterations": _ints([1, 2], [0, -1, 10**8]),
    "--stepsize": floats,
    "--optimizer": st.sampled_from(["adam", "gd", "sgd"]),
    "--diff-method": methods,
    "--precision": st.sampled_from(["c128", "c64", "c32"]),
    "--formulation": st.sampled_from(["fast", "qml.qaoa", "slow"]),
    "--results-dir": folders,
    "--checkpoint-dir": folders,
    "--resume": None,
    "--no-plot": None,
    "--quiet": None,
}
QNN = {
    "--device": st.sampled_from(cheap) | devices,
    "--ndata": _ints([4, 6, 8], [-1, 0, 3, 10**6]),
    "--batch-size": _ints([2, 4], [0, -1]),
    "--epochs": _ints([1], [0, -1]),
    "--lr": floats,
    "--gamma": floats,
    "--margin": floats,
    "--seed": _ints([1, 2], [-1, 2**32]),
    "--test-fraction": st.sampled_from(["0.25", "0.5", "0", "1", "x"]),
    "--patience": _ints([1], [0, -3]),
    "--workers": _ints([1], [0, -1]),
    "--scale-lr": None,
    "--diff-method": methods,
    "--data": st.sampled_from(["in/data.csv", "in/bad.csv", "missing.csv", "mine"]),
    "--quiet": None,
}
COMMANDS = {
    ("list",): {"--precision": st.sampled_from(["c64", "c128", "c32"]), "--json": None},
    ("probe",): {
        "SPEC": devices,
        "--wires": _ints([1, 3, 20], [-1, 0, 600, 10**12]),
        "--precision": st.sampled_from(["c64", "c128"]),
        "--diff-method": methods,
        "--json": None,
        "--mpi": None,
        "--clear": None,
    },
    ("plugins",): {"--json": None, "-v": None, "--verbose": None},
    ("bench", "report"): {
        "RESULTS.json": st.sampled_from(["in/bench.json", "in/junk.json", "missing.json", "mine"]),
        "--prices": st.sampled_from(["in/prices.toml", "in/junk.json", "missing.toml"]),
        "--plot": st.sampled_from(["out/plot.png", "mine", "out.png"]),
    },
    ("calibrate",): {
        "--workload": st.sampled_from(["qaoa", "qnn", "circuits", "nope"]),
        "--sizes": st.sampled_from(["4", "1", "0", "x", "4,5", "1,2"]),
        "--repeats": _ints([1], [0, -1]),
        "--backends": st.sampled_from(["default.qubit", "lightning.qubit,default.qubit", "nosuch", ""]),
        "--output": st.sampled_from(["out/profile.json", "mine", "in/graph.txt"]),
    },
    ("warmup",): {"--precision": st.sampled_from(["c256", "", "x"])},  # only refusals: a warm-up compiles for minutes
    ("run", "qaoa"): QAOA,
    ("run", "qnn"): {
        **QNN,
        "--nwires": _ints([1, 2], [0, -1, 600]),
        "--results-dir": folders,
        "--checkpoint-dir": folders,
        "--resume": None,
    },
    ("sweep", "qnn"): {
        **QNN,
        "--nwires": st.sampled_from(["1,2", "2", "2,40", "0", "x", "1,,2", "2,2"]),
        "--results-dir": folders,
    },
    ("job", "run"): {  # only entry points refused before the job starts (its own tests run jobs)
        "ENTRY_POINT": st.sampled_from(["missing.py", "1bad", "a b", "m:1x", "mine/"]),
        "--device": devices,
        "--hyperparameters": st.sampled_from(["in/hp.json", "in/junk.json", "missing.json"]),
        "--input-data": st.sampled_from(["a=in", "=x", "b=missing"]),
        "--checkpoint-dir": folders,
        "--results-dir": folders,
        "--job-name": st.sampled_from(["j1", "bad name"]),
        "--jobs-dir": folders,
    },
}
# options left out, and why (a test elsewhere runs them)
NOT_FUZZED = {
    ("run", "qaoa"): {"--mpi"}
}  # starts MPI in this process: test_distributed and test_boundary_answers run it under mpiexec
# what each command may write: the folders its options name (or their defaults), and its named output files
DEFAULT_FOLDERS = {("run", "qaoa"): "results/qaoa", ("run", "qnn"): "results/qnn", ("sweep", "qnn"): "results/qnn-sweep"}
FOLDER_OPTIONS = ("--results-dir", "--checkpoint-dir", "--jobs-dir")
FILE_OPTIONS = ("--plot", "--output")


def _help_options(path: tuple[str, ...]) -> set[str]:
    """The options ``qbackends PATH --help`` lists (each on a line of its own, first)."""
    lines = [line.strip() for line in run([*path, "--help"]).out.splitlines() if line.strip().startswith("-")]
    return {name for line in lines for name in re.findall(r"(?:^|, )(--?[a-z][\w-]*)", line)} - {"-h", "--help"}


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_option_of_every_command_is_fuzzed(path):
    """A new option without a strategy here fails this: the fuzz covers the parser as it is."""
    fuzzed = set(COMMANDS[path]) | NOT_FUZZED.get(path, set())
    assert _help_options(path) <= fuzzed, _help_options(path) - fuzzed


def _argv(data) -> tuple[tuple[str, ...], list[str]]:
    path = data.draw(st.sampled_from(sorted(COMMANDS)), "command")
    table = COMMANDS[path]
    argv = list(path)
    for name in [n for n in table if not n.startswith("-")]:  # positionals, mostly given
        if data.draw(st.sampled_from([True] * 9 + [False]), f"{name} given"):
            argv.append(data.draw(table[name], name))
    for name in sorted(data.draw(st.sets(st.sampled_from([n for n in table if n.startswith("-")]), max_size=6), "options")):
        argv.append(name)
        if table[name] is not None:
            argv.append(data.draw(table[name], name))
    if path == ("calibrate",):  # never the default sizes and backends (minutes of timing): a small one, or a refusal
        argv += ["--sizes", data.draw(table["--sizes"], "sizes"), "--backends", data.draw(table["--backends"], "backends")]
        if "--workload" in argv and argv[argv.index("--workload") + 1] == "circuits":
            argv += ["--repeats", "0"]
    if path == ("warmup",):  # only a refused precision: a warm-up from an empty cache compiles for minutes
        argv += ["--precision", data.draw(table["--precision"], "precision")]
    if path == ("run", "qaoa") and "--iterations" not in argv:
        argv += ["--iterations", "1"]
    if path == ("run", "qaoa") and "--nodes" not in argv and "--graph" not in argv:
        argv += ["--nodes", "3", "--edges", "2"]
    if path[0] in ("run", "sweep") and path[1] == "qnn":
        argv += [] if "--ndata" in argv else ["--ndata", "8"]
        argv += [] if "--epochs" in argv else ["--epochs", "1"]
        argv += [] if "--nwires" in argv else ["--nwires", "1"]
    if data.draw(st.sampled_from([False] * 9 + [True]), "junk"):  # a stray token or option
        argv.insert(
            data.draw(st.integers(0, len(argv)), "at"),
            data.draw(st.sampled_from(["--nope", "-x", "extra", "--", "--json=1"]) | env_text, "token"),
        )
    return path, argv


def _own(path: tuple[str, ...], argv: list[str]) -> list[str]:
    given = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i] in (*FOLDER_OPTIONS, *FILE_OPTIONS)}
    own = [v for k, v in given.items() if k in FOLDER_OPTIONS]
    if path in DEFAULT_FOLDERS and "--results-dir" not in given:
        own.append(DEFAULT_FOLDERS[path])
    if path == ("job", "run") and "--jobs-dir" not in given:
        own.append("jobs")
    for name in FILE_OPTIONS:  # a named output file, and its lock beside it
        if name in given:
            own += [given[name], given[name] + ".lock"]
    if path == ("calibrate",) and "--output" not in given:
        own += ["profile"]
    return own


@budget(250)
@given(st.data())
def test_any_arguments_answer_in_one_line_and_write_only_their_own_folders(data):
    path, argv = _argv(data)
    with sandbox() as root:
        for rel, content in FILES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(content)
        shutil.copy(SAMPLE, root / "in" / "bench.json")
        before = snapshot(root)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("QBACKENDS_PROFILE", str(root / "profile" / "profile.json"))
            outcome = run(argv)
        event(f"{' '.join(path)}: exit {outcome.code}")
        check_outcome(outcome, argv)
        check_files(root, before, _own(path, argv))
        if outcome.code == 0 and "--json" in argv and path in (("list",), ("plugins",)):
            json.loads(outcome.out)
