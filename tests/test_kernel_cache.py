"""Where the simulators' numba kernels are cached: never in a folder another user could write, never a
broken file read back, and their one-time compile timed; a NUMBA_NUM_THREADS numba refuses is a typed error.

Kernels of the test's own (one small function, compiled in under a second) stand in for the
simulators' where a fresh cache is needed.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numba
import numpy as np
import pytest
from numba.core.caching import UserProvidedCacheLocator

import qbackends
from qbackends.batched import kernels as batched_kernels
from qbackends.cli import main
from qbackends.fused import kernels, warmup

TINY = """from pathlib import Path

from qbackends.fused.cachedir import kernel_cache

CACHE = kernel_cache(Path(__file__))


@CACHE.njit()
def add(a, b):
    return a + b
"""


_IMPORTS = itertools.count()


def _import(source: Path):
    """Import ``source`` afresh (a new module object, so new dispatchers that read numba's cache again)."""
    spec = importlib.util.spec_from_file_location(f"tiny_kernels_{next(_IMPORTS)}", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _index_name(source: Path, function: str, text: str) -> str:
    """The name numba gives ``function``'s cache index: file stem, qualname, first line, Python version."""
    line = text.splitlines().index(f"def {function}(a, b):")  # the decorator's line, counted from 1
    return f"{source.stem}.{function}-{line}.py{sys.version_info.major}{sys.version_info.minor}{sys.abiflags}.nbi"


class _Planted:
    """What another user could plant as an index: unpickling it creates ``proof``."""

    def __init__(self, proof: Path) -> None:
        self.proof = proof

    def __reduce__(self):
        return (open, (str(self.proof), "w"))


@pytest.fixture
def read_only(monkeypatch, tmp_path):
    """A source folder whose __pycache__ cannot be made and a HOME cache that cannot be written (a file is
    in the way, as a read-only installation is to numba), and a temporary directory of the test's own."""
    source = tmp_path / "site" / "tinykernels.py"
    source.parent.mkdir()
    source.write_text(TINY)
    (source.parent / "__pycache__").write_text("")
    (tmp_path / "home").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / "cache"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return source


def test_the_simulators_kernels_are_cached_where_numba_caches_them():
    """The folder decided before the kernels are defined is the one numba uses, and numba's settings are left as they were."""
    assert Path(kernels.parity.stats.cache_path) == kernels.CACHE.folder
    assert Path(batched_kernels._mm.stats.cache_path) == batched_kernels.CACHE.folder
    assert numba.config.CACHE_DIR == os.environ.get("NUMBA_CACHE_DIR", "")


def test_a_read_only_installation_caches_kernels_in_a_private_temporary_folder(read_only, tmp_path, caplog):
    with caplog.at_level("WARNING", logger="qbackends"):
        module = _import(read_only)
    fallback = tmp_path / "tmp" / f"qbackends-numba-{os.getuid()}"
    assert (fallback.stat().st_mode & 0o777) == 0o700
    assert module.CACHE.folder == fallback / UserProvidedCacheLocator.get_suitable_cache_subpath(str(read_only))
    assert module.add(2, 3) == 5
    assert module.add.stats.cache_path == str(module.CACHE.folder)
    assert (module.CACHE.folder / _index_name(read_only, "add", TINY)).is_file()
    assert numba.config.CACHE_DIR == ""  # set only while each kernel was defined
    assert caplog.messages == [
        f"qbackends: numba can write its cache neither beside the kernels' source nor in {tmp_path / 'home' / 'cache' / 'numba'}; "
        f"the kernels are cached in {fallback} (set NUMBA_CACHE_DIR to keep them elsewhere)."
    ]


@pytest.mark.parametrize(
    ("planted_by", "reason"),
    [
        ("mode 0777", "its mode is 0777, not 0700"),
        ("another user", "it belongs to uid 12345, not to uid {uid}"),
        ("a symbolic link", "it is a symbolic link"),
    ],
)
def test_a_temporary_folder_others_could_write_is_never_read(read_only, tmp_path, caplog, planted_by, reason):
    """Another user made the folder first and put an index in it: the kernels are not cached, nothing there is read."""
    fallback = tmp_path / "tmp" / f"qbackends-numba-{os.getuid()}"
    planted = tmp_path / "theirs" if planted_by == "a symbolic link" else fallback
    subfolder = planted / UserProvidedCacheLocator.get_suitable_cache_subpath(str(read_only))
    subfolder.mkdir(parents=True)
    proof = tmp_path / "their-code-ran"
    (subfolder / _index_name(read_only, "add", TINY)).write_bytes(pickle.dumps(_Planted(proof)))
    if planted_by == "mode 0777":
        fallback.chmod(0o777)
    elif planted_by == "another user":
        os.chown(fallback, 12345, 12345)
        fallback.chmod(0o700)
    else:
        planted.chmod(0o700)
        fallback.symlink_to(planted)
    with caplog.at_level("WARNING", logger="qbackends"):
        module = _import(read_only)
    assert module.CACHE.folder is None
    assert module.add(2, 3) == 5
    assert module.add.stats.cache_path is None  # numba's cache is off for these kernels
    assert not proof.exists()
    assert [p.name for p in subfolder.iterdir()] == [_index_name(read_only, "add", TINY)]
    assert caplog.messages == [
        f"qbackends: numba can write its cache neither beside the kernels' source nor in {tmp_path / 'home' / 'cache' / 'numba'}, "
        f"and {fallback} is not private to this user ({reason.format(uid=os.getuid())}): the kernels are not cached, so "
        f"they compile in every run. Fix: set NUMBA_CACHE_DIR to a folder of your own, or remove {fallback} if it is yours."
    ]


def test_fused_kernels_are_not_cached_in_a_temporary_folder_another_user_made(tmp_path):
    """The real kernels module, in a read-only installation (a copy whose __pycache__ cannot be made)."""
    site = tmp_path / "site"
    shutil.copytree(Path(qbackends.__file__).parent, site / "qbackends", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "qbackends" / "fused" / "__pycache__").write_text("")
    (tmp_path / "home").write_text("")
    fallback = tmp_path / "tmp" / f"qbackends-numba-{os.getuid()}"
    fallback.mkdir(parents=True)
    fallback.chmod(0o777)
    env = dict(os.environ, PYTHONPATH=str(site), TMPDIR=str(tmp_path / "tmp"), XDG_CACHE_HOME=str(tmp_path / "home" / "c"))
    env.pop("NUMBA_CACHE_DIR", None)
    code = "from qbackends.fused import kernels; print(kernels.CACHE.folder, kernels.zsign(3), kernels.zsign.stats.cache_path)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "1.0", "None"]
    assert f"and {fallback} is not private to this user (its mode is 0777, not 0700)" in out.stderr
    assert list(fallback.iterdir()) == []


def _corrupt(folder: Path, index: str, how: str) -> str:
    """Break one file of a cache as disks, copies and killed processes do; the name of the broken file."""
    data = folder / index.replace(".nbi", ".1.nbc")
    if how == "truncated data":
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
        return data.name
    if how == "data is a folder":
        data.unlink()
        (data / "x").mkdir(parents=True)
        return data.name
    text = (folder / index).read_bytes()
    if how == "empty index":
        text = b""
    elif how == "garbled index":
        text = text[:60] + b"\xce" * 30 + text[90:]
    (folder / index).write_bytes(text)
    return index


@pytest.mark.parametrize("how", ["truncated data", "data is a folder", "empty index", "garbled index"])
def test_a_broken_cache_file_is_removed_and_its_kernel_compiles_again(monkeypatch, tmp_path, caplog, how):
    """Each of these made numba fail on every run (EOFError: Ran out of input, UnpicklingError, IsADirectoryError)."""
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    source = tmp_path / "tinykernels.py"
    source.write_text(TINY)
    first = _import(source)
    assert first.add(2, 3) == 5 and sum(first.add.stats.cache_misses.values()) == 1
    folder = tmp_path / "__pycache__"
    assert first.CACHE.folder == folder
    _import(source)  # reads the new files through once and records them as readable
    cached = sorted(path.name for path in folder.glob("tinykernels.*.nb[ic]"))
    assert len(cached) == 2 and sorted(json.loads((folder / "tinykernels.checked").read_text())) == cached
    broken = _corrupt(folder, _index_name(source, "add", TINY), how)
    with caplog.at_level("WARNING", logger="qbackends"):
        again = _import(source)
    assert caplog.messages == [
        f"qbackends: numba's cache in {folder} held files it could not read back ({broken}); they are removed, "
        "and those kernels compile again."
    ]
    assert again.add(2, 3) == 5 and sum(again.add.stats.cache_misses.values()) == 1  # compiled, not loaded
    caplog.clear()
    with caplog.at_level("WARNING", logger="qbackends"):
        third = _import(source)
    assert third.add(2, 3) == 5 and sum(third.add.stats.cache_hits.values()) == 1  # the rewritten cache loads
    assert caplog.messages == []


def test_the_compile_time_measured_here_is_what_the_message_and_auto_use(monkeypatch, tmp_path, caplog):
    from qbackends import auto, get_registry

    fused = get_registry().backends["qbackends/fused.qubit"]
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # where the marker and the measurement are kept
    assert not warmup.compiled() and warmup.compile_seconds() == warmup.COMPILE_SECONDS == 150.0
    assert auto.one_time_seconds(fused) == 150.0  # what auto spreads over a run's steps
    (tmp_path / warmup.SECONDS_FILE).write_text("5.0\n")  # as a compile here measured
    assert warmup.compile_seconds() == 5.0 and auto.one_time_seconds(fused) == 5.0
    with caplog.at_level("WARNING", logger="qbackends"):
        auto.log_decision(auto.Decision("qbackends/fused.qubit"), fused)
    assert caplog.messages == [
        "qbackends: compiling fused.qubit's kernels, once per installation (about 5 s; `qbackends warmup` does it ahead)..."
    ]
    warmup.mark_compiled(61.54)
    assert warmup.compiled() and (tmp_path / warmup.SECONDS_FILE).read_text() == "61.5\n"
    assert auto.one_time_seconds(fused) == 0.0
    warmup.mark_compiled(0.0)  # kernels loaded, not compiled: the measurement stays
    assert warmup.compile_seconds() == 61.5
    (tmp_path / warmup.SECONDS_FILE).write_text("not a number\n")
    assert warmup.compile_seconds() == 150.0


def test_numbas_compiling_is_timed_and_loading_is_not():
    spent: list[float] = []

    @numba.njit
    def double(x):
        return 2 * x

    with warmup.timing_compiles(spent.append):
        assert double(21) == 42
    with warmup.timing_compiles(spent.append):
        assert double(4) == 8  # compiled already
    assert len(spent) == 1 and 0 < spent[0] < 60


def test_the_documented_compile_time_is_the_constant(capsys):
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert f"about {warmup.COMPILE_SECONDS:.0f} s on two cores" in " ".join(readme.split())
    with pytest.raises(SystemExit):
        main(["warmup", "--help"])
    assert f"about {warmup.COMPILE_SECONDS:.0f} s on two cores" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("command", "value"),
    [
        (["run", "qaoa", "--device", "local:qbackends/fused.qubit", "--nodes", "4", "--edges", "3", "--iterations", "1"], "0"),
        (["run", "qaoa", "--iterations", "1"], "0"),  # auto asks whether fused.qubit's kernels are compiled
        (["run", "qaoa", "--iterations", "1"], "-2"),
        (["run", "qnn", "--nwires", "4", "--ndata", "32", "--epochs", "1"], "0"),  # auto takes batched.qubit
    ],
)
def test_numba_num_threads_below_one_is_a_one_line_error(tmp_path, command, value):
    env = dict(os.environ, NUMBA_NUM_THREADS=value)
    out = subprocess.run(
        [sys.executable, "-m", "qbackends.cli", *command, "--results-dir", str(tmp_path), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
    )
    cores = len(os.sched_getaffinity(0))
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"qbackends: error: NUMBA_NUM_THREADS={value} asks numba for no threads; fused.qubit and batched.qubit need 1 "
        f"or more (numba's default here: {cores}, the cores this process may use). Fix: unset NUMBA_NUM_THREADS, or "
        f"set it to a count from 1 to {cores}."
    )


def test_batched_kernels_are_weighed_until_a_gradient_has_run_in_this_installation(monkeypatch, tmp_path):
    import pennylane as qml

    from qbackends import auto, get_registry
    from qbackends.batched import warmup as batched_warmup
    from qbackends.batched.device import BatchedQubit

    batched = get_registry().backends["qbackends/batched.qubit"]
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # where the marker is kept: none yet
    assert auto.one_time_seconds(batched) == batched_warmup.COMPILE_SECONDS == 7.0

    @qml.qnode(BatchedQubit(wires=2), diff_method="adjoint")
    def circuit(x):
        qml.RX(x, wires=0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    circuit(qml.numpy.array(0.4, requires_grad=False))
    assert auto.one_time_seconds(batched) == 7.0  # values alone: the adjoint kernels may still be cold
    gradient = qml.grad(circuit)(qml.numpy.array(0.4, requires_grad=True))
    assert gradient == pytest.approx(-np.sin(0.4))
    assert auto.one_time_seconds(batched) == 0.0 and batched_warmup.COMPILATION.done()


SIGNATURES = """import json, sys
import numba
from qbackends.fused import kernels
if sys.argv[1] == "warmup":
    from qbackends.fused import warmup
    warmup.compile_kernels(sys.argv[2])
elif sys.argv[1] == "circuits":  # circuits users write: templates, a broadcast batch, CNOTs between layers
    import numpy as np
    import pennylane as qml
    from qbackends import get_device
    dev = get_device("local:qbackends/fused.qubit", wires=5, precision=sys.argv[2])
    inputs = np.random.default_rng(2).uniform(size=(8, 3))
    hamiltonian = qml.Hamiltonian([0.5, -0.3, 0.8], [qml.Z(0) @ qml.Z(1), qml.X(2), qml.Y(3) @ qml.Z(4)])
    @qml.qnode(dev, diff_method="adjoint")
    def broadcast(w):
        qml.AngleEmbedding(inputs, wires=range(3))
        qml.BasicEntanglerLayers(w, wires=range(3))
        return qml.expval(qml.Z(0))
    @qml.qnode(dev, diff_method="adjoint")
    def template(w):
        qml.StronglyEntanglingLayers(w, wires=range(5))
        return qml.expval(hamiltonian)
    for circuit, shape in ((broadcast, (2, 3)), (template, (2, 5, 3))):
        w = qml.numpy.array(np.random.default_rng(1).uniform(size=shape), requires_grad=True)
        qml.jacobian(lambda w: qml.numpy.sum(circuit(w)))(w)
        circuit(qml.numpy.array(w, requires_grad=False))
else:  # the user's first runs: qml.qaoa layers on 18 wires (two passes per mixer), unweighted and weighted
    import pennylane as qml
    from qbackends import get_device
    edges = [(w, (w + 1) % 18) for w in range(18)] + [(w, (w + 5) % 18) for w in range(0, 18, 2)]
    mixer = qml.Hamiltonian([1.0] * 18, [qml.X(w) for w in range(18)])
    for weights in ([1.0] * len(edges), [0.3 + 0.1 * i for i in range(len(edges))]):
        cost = qml.Hamiltonian(weights, [qml.Z(u) @ qml.Z(v) for u, v in edges])
        @qml.qnode(get_device("local:qbackends/fused.qubit", wires=18, precision=sys.argv[2]), diff_method="adjoint")
        def energy(p):
            for w in range(18):
                qml.Hadamard(w)
            for layer in range(2):
                qml.qaoa.cost_layer(p[0][layer], cost)
                qml.qaoa.mixer_layer(p[1][layer], mixer)
            return qml.expval(cost)
        angles = [[0.1, 0.2], [0.3, 0.4]]
        qml.grad(energy)(qml.numpy.array(angles, requires_grad=True))
        energy(qml.numpy.array(angles, requires_grad=False))
kernels_used = {name: sorted(map(str, f.signatures)) for name, f in vars(kernels).items() if isinstance(f, numba.core.registry.CPUDispatcher)}
print(json.dumps(kernels_used))
"""


@pytest.mark.parametrize("precision", ["c128", "c64"])
def test_warmup_compiles_every_kernel_a_qaoa_or_users_circuit_takes(precision):
    """`qbackends warmup` compiles what unweighted (swept by level) and weighted (by angle) qml.qaoa
    layers take (``qbackends warmup --precision``), and what templates, a broadcast batch and layers
    between CNOTs take, so that a first run after it compiles nothing (after a warm-up of QAOA alone, a
    3-wire broadcast circuit under auto compiled for 118 s): each kernel's signatures in a process that
    ran them are among those of a process that only warmed up."""

    def signatures(mode: str) -> dict[str, list[str]]:
        run = subprocess.run([sys.executable, "-c", SIGNATURES, mode, precision], capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-2000:]
        return json.loads(run.stdout.strip().splitlines()[-1])

    warmed, qaoa, circuits = signatures("warmup"), signatures("qaoa"), signatures("circuits")
    assert "layers_with_diagonal" in qaoa and len(qaoa["layers_with_diagonal"]) == 2  # by level and by angle
    assert "layer_adjoint" in circuits and "expval" in circuits  # a layer between CNOTs undone on φ and λ; values alone
    for used in (qaoa, circuits):
        missing = {name: sorted(set(sigs) - set(warmed.get(name, []))) for name, sigs in used.items()}
        assert not {name: sigs for name, sigs in missing.items() if sigs}


def test_a_cold_devices_first_gradient_compiles_every_other_kernel_then_marks_them(monkeypatch, tmp_path, caplog):
    """The marker means every kernel: a device whose first value and gradient ran on cold kernels runs the
    warm-up circuits for the rest before it marks them compiled (after a QAOA-only compile a layer between
    CNOTs compiled for about two minutes in an auto trial); the warm-up's own devices mark nothing."""
    import dataclasses
    import types

    import pennylane as qml

    from qbackends.fused.device import FusedQubit
    from qbackends.simbase.warmup import CompileTimer

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # where the markers are looked for: none yet
    ran = []

    def run(precision):
        @qml.qnode(FusedQubit(wires=1), diff_method="adjoint")
        def circuit(x):
            qml.RX(x, wires=0)
            return qml.expval(qml.Z(0))

        ran.append(precision)
        gradient = qml.grad(circuit)(qml.numpy.array(0.4, requires_grad=True))
        assert gradient == pytest.approx(-np.sin(0.4))  # a real device of the simulator, inside the warm-up

    monkeypatch.setitem(sys.modules, "warmup_circuits_under_test", types.SimpleNamespace(run=run))
    compilation = dataclasses.replace(warmup.COMPILATION, stem="under-test", circuits="warmup_circuits_under_test:run")
    cold = CompileTimer(compilation, "c128")
    warm_later = CompileTimer(compilation, "c128")
    assert not compilation.done() and ran == []
    with caplog.at_level("WARNING", logger="qbackends"):
        cold.gradient_ran()
    assert ran == ["c128"] and compilation.done()
    assert caplog.messages == [
        "qbackends: compiling the rest of fused.qubit's c128 kernels, once per installation (`qbackends warmup` does it ahead)..."
    ]
    assert not warmup.compiled()  # the device inside the warm-up left the marking to it
    cold.gradient_ran()
    CompileTimer(compilation, "c128").gradient_ran()  # warm: nothing runs again
    assert ran == ["c128"]
    warm_later.gradient_ran()  # made while cold, but another has compiled every kernel since
    assert ran == ["c128"]
