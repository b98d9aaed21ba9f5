"""The compiled kernels as installed: what they were built for, how they take arrays, and that qbackends
does no work of theirs at import. Their answers are checked through the simulators (test_fused.py,
test_batched.py, test_differential.py) against lightning and default.qubit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import networkx as nx
import numpy as np
import pennylane as qml
import pytest
import qbackends_native

from qbackends.fused import kernels


def test_the_build_says_what_it_was_compiled_for():
    assert qbackends_native.ARCH in qbackends_native.BUILDS  # QBACKENDS_ARCH at build time: native unless stated
    assert qbackends_native.VECTOR_ISA in ("avx512f", "avx2", "avx", "sse2", "generic")


def _cpu_flags() -> set[str]:
    with open("/proc/cpuinfo") as cpuinfo:
        return next((set(line.split(":", 1)[1].split()) for line in cpuinfo if line.startswith("flags")), set())


# The features /proc/cpuinfo lists that each x86-64 level adds (the psABI's table; lzcnt is abm there).
LEVEL_FLAGS = {
    "x86-64-v2": {"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"},
    "x86-64-v3": {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"},
    "x86-64-v4": {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
}


def _levels_by_flags() -> list[str]:
    """The levels past x86-64 this CPU's flags name, lowest first (each needs the features of those below it)."""
    flags, levels = _cpu_flags(), []
    for level, needs in LEVEL_FLAGS.items():
        if not needs <= flags:
            break
        levels.append(level)
    return levels


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo") or not _cpu_flags(), reason="no /proc/cpuinfo flags to compare with")
def test_the_levels_this_cpu_runs_are_those_its_flags_name():
    from qbackends_native import _cpu

    assert _cpu.runs("x86-64") is True
    assert {level: _cpu.runs(level) for level in LEVEL_FLAGS} == {level: level in _levels_by_flags() for level in LEVEL_FLAGS}
    assert _cpu.runs("znver3") is False and _cpu.runs("native") is False  # not levels: never picked by asking


def test_of_several_builds_the_highest_level_this_cpu_runs_is_loaded():
    """A build that travels holds the kernels once per x86-64 level (QBACKENDS_ARCH=x86-64-v3,x86-64-v4); the
    package loads the highest the CPU runs, in whatever order they were named, and says so when it runs none."""
    from qbackends_native import _best_build

    avx2_machine = {"x86-64", "x86-64-v2", "x86-64-v3"}.__contains__  # an AMD EPYC of Zen 3, say
    avx512_machine = {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"}.__contains__
    assert _best_build(("x86-64-v3", "x86-64-v4"), avx2_machine) == "x86-64-v3"
    assert _best_build(("x86-64-v3", "x86-64-v4"), avx512_machine) == "x86-64-v4"
    assert _best_build(("x86-64-v4", "x86-64", "x86-64-v2"), avx2_machine) == "x86-64-v2"
    with pytest.raises(ImportError) as refused:
        _best_build(("x86-64-v3", "x86-64-v4"), {"x86-64", "x86-64-v2"}.__contains__)
    assert str(refused.value) == (
        "qbackends-native was built for x86-64-v3, x86-64-v4, and this CPU runs none of them: reinstall it here "
        "(pip install ./native builds for this machine), or with QBACKENDS_ARCH naming a level it runs"
    )


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="no C++ compiler to build with")
def test_a_build_for_several_levels_loads_the_best_here_and_runs_as_the_installed_one(tmp_path):
    """QBACKENDS_ARCH=x86-64-v2,x86-64-v3,x86-64-v4 pip install ./native: a module per level, the highest this CPU's
    flags allow loaded, and a QAOA gradient from it as the installed build's; one level alone refused by name on a CPU
    without it; a list with a non-level refused at build."""
    native = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "native")
    target = tmp_path / "levels"
    env = dict(os.environ, QBACKENDS_ARCH="x86-64-v2,x86-64-v3,x86-64-v4")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--target"]
    subprocess.run([*pip, str(target), "-C", f"build-dir={tmp_path / 'build'}", native], env=env, check=True)
    best = _levels_by_flags()[-1]
    script = (
        "import qbackends_native as q, numpy as np, pennylane as qml, networkx as nx\n"
        "from qbackends import get_device\n"
        "cost, mixer = qml.qaoa.maxcut(nx.random_regular_graph(3, 12, seed=3))\n"
        "@qml.qnode(get_device('local:qbackends/fused.qubit', wires=12), diff_method='adjoint')\n"
        "def energy(p):\n"
        "    [qml.Hadamard(w) for w in range(12)]\n"
        "    qml.qaoa.cost_layer(p[0], cost); qml.qaoa.mixer_layer(p[1], mixer)\n"
        "    return qml.expval(cost)\n"
        "p = qml.numpy.array([0.4, 0.7], requires_grad=True)\n"
        "print(q.ARCH, ','.join(q.BUILDS), q.__file__, float(energy(p)), *qml.grad(energy)(p))\n"
    )

    def run(path):
        command = [sys.executable, "-c", script]
        return subprocess.run(
            command, env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True, check=True
        ).stdout.split()

    arch, builds, where, *numbers = run(str(target))
    assert (arch, builds, where) == (best, "x86-64-v2,x86-64-v3,x86-64-v4", str(target / "qbackends_native" / "__init__.py"))
    installed = run("")
    assert installed[2] != where
    np.testing.assert_allclose([float(x) for x in numbers], [float(x) for x in installed[3:]], atol=1e-12, rtol=0)

    env["QBACKENDS_ARCH"] = "x86-64-v4"  # one level: loaded where the CPU has it, refused by name where not
    subprocess.run([*pip, str(tmp_path / "v4"), "-C", f"build-dir={tmp_path / 'build-v4'}", native], env=env, check=True)
    command = [sys.executable, "-c", "import qbackends_native as q; print(q.ARCH)"]
    loaded = subprocess.run(command, env=dict(os.environ, PYTHONPATH=str(tmp_path / "v4")), capture_output=True, text=True)
    if "x86-64-v4" in _levels_by_flags():
        assert loaded.stdout.split() == ["x86-64-v4"], loaded.stderr
    else:
        assert loaded.returncode == 1 and loaded.stderr.strip().splitlines()[-1] == (
            "ImportError: qbackends-native was built for x86-64-v4, and this CPU runs none of them: reinstall it here "
            "(pip install ./native builds for this machine), or with QBACKENDS_ARCH naming a level it runs"
        )

    env["QBACKENDS_ARCH"] = "x86-64-v3,znver3"
    refused = subprocess.run(
        [*pip, str(tmp_path / "refused"), "-C", f"build-dir={tmp_path / 'build2'}", native],
        env=env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0
    assert "QBACKENDS_ARCH=x86-64-v3,znver3: several builds are x86-64 levels" in " ".join(
        (refused.stdout + refused.stderr).split()
    )


def test_a_native_build_records_the_cpu_it_was_built_on():
    """A native build's objects carry the CPU ``-march=native`` meant when they were compiled (so a build folder
    kept from another CPU recompiles): here, the CPU this machine's compiler names now."""
    if qbackends_native.ARCH != "native":
        pytest.skip(f"built for the stated baseline {qbackends_native.ARCH}")
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler here to ask what -march=native means")
    said = subprocess.run([compiler, "-march=native", "-###", "-E", "-"], input="", capture_output=True, text=True).stderr
    named = re.search(r'"(?:-march=|-target-cpu" ")([A-Za-z0-9_.-]+)', said)
    assert named is not None, said
    label, cpu, key = qbackends_native.BUILD_CPU.split()
    assert (label, cpu, len(key)) == ("native:", named.group(1), 12)


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed")
def test_stores_into_large_states_stream_past_the_caches():
    """On x86-64 the state stores of a pass over a large state are non-temporal (movnt*) instructions."""
    if not qbackends_native.VECTOR_ISA.startswith(("avx", "sse")):
        pytest.skip(f"no x86 vector stores in a {qbackends_native.VECTOR_ISA} build")
    listing = subprocess.run(["objdump", "-d", qbackends_native._kernels.__file__], capture_output=True, text=True, check=True)
    assert "movntp" in listing.stdout


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("count", [1, 5, 8, 9, 34, 64, 65, 287, 512, 513, 700])
@pytest.mark.parametrize("geometric", [True, False, "nan"])
@pytest.mark.parametrize("n", [2, 13])
def test_phases_by_level_are_the_tables_entries(dtype, count, geometric, n):
    """A cut's phases by level, as the sweeps apply them (float32 on AVX2: products of 8-entry tables, one to three,
    where the table is geometric; otherwise looked up): psi[k] = 2^(-n/2)·phases[levels[k]] for uniform vectors,
    from 1 to 700 levels, the table geometric (a cut's), not, or with one level's phase NaN (its amplitudes alone
    NaN), to the precision's rounding; 2 wires: fewer amplitudes than a register."""
    rng = np.random.default_rng(count)
    levels = rng.integers(0, count, 2**n).astype(np.uint8 if count <= 256 else np.uint16)
    angles = rng.uniform(-np.pi, np.pi, count) if geometric is False else 0.37 + 1.3 * np.arange(count)
    phases = np.exp(1j * angles).astype(dtype)
    if geometric == "nan":
        phases[count // 2] = np.nan
    psi = np.zeros(2**n, dtype=dtype)
    plus = np.array([[1.0, 1.0]] * n, dtype=complex) / np.sqrt(2.0)
    low = min(n, kernels.LOW_BITS)
    kernels.product_state(psi, low, plus[:low].copy(), plus[low:].copy(), levels, phases)
    expected = phases.astype(complex)[levels] / 2 ** (n / 2)
    tol = 4e-7 if dtype == np.complex64 else 4e-15
    np.testing.assert_allclose(psi * 2 ** (n / 2), expected * 2 ** (n / 2), atol=tol, rtol=0)


def test_a_kernel_given_the_wrong_array_says_which():
    psi = np.zeros(8, dtype=np.complex128)
    with pytest.raises(TypeError, match="diagonal: wrong dtype"):
        kernels.expval(psi, np.zeros(8, dtype=np.int32))
    with pytest.raises(TypeError, match="complex64 or complex128 states"):
        kernels.cnot(np.zeros(8), 0, 1)
    with pytest.raises(TypeError, match="psi: the kernels take C-contiguous arrays"):
        kernels.cnot(np.zeros(16, dtype=np.complex128)[::2], 0, 1)


def test_thread_counts_are_set_and_refused_by_value():
    before = kernels.threads()
    try:
        kernels.set_num_threads(1)
        assert kernels.threads() == 1
        with pytest.raises(ValueError, match="a count of 1 or more"):
            kernels.set_num_threads(0)
    finally:
        kernels.set_num_threads(before)


@pytest.mark.parametrize(("omp", "expected"), [(None, "cores"), ("3", "3")])
def test_torch_lowering_its_threads_leaves_the_kernels_theirs(omp, expected):
    """torch.set_num_threads(1), as a QNN's data-parallel workers call it, sets OpenMP's per-thread count to 1 for
    the whole process; the kernels still take OMP_NUM_THREADS, else every core this process may use."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"} | ({"OMP_NUM_THREADS": omp} if omp else {})
    code = (
        "import os, torch; torch.set_num_threads(1); from qbackends.fused import kernels;"
        "print(kernels.threads(), len(os.sched_getaffinity(0)))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, timeout=300, capture_output=True, text=True, env=env)
    threads, cores = out.stdout.split()
    assert threads == (cores if expected == "cores" else expected)


@pytest.mark.parametrize("precision", ["c128", "c64"])
def test_one_thread_and_two_give_the_same_qaoa_gradient(precision):
    """Each thread sums its own tiles: the split changes the order of a sum, nothing more."""
    dev = qml.device("qbackends.fused.qubit", wires=16, c_dtype=np.complex64 if precision == "c64" else np.complex128)
    cost, mixer = qml.qaoa.maxcut(nx.gnm_random_graph(16, 24, seed=3))

    @qml.qnode(dev, diff_method="adjoint")
    def energy(params):
        for w in range(16):
            qml.Hadamard(w)
        for layer in range(2):
            qml.qaoa.cost_layer(params[0, layer], cost)
            qml.qaoa.mixer_layer(params[1, layer], mixer)
        return qml.expval(cost)

    params = qml.numpy.array([[0.4, 0.7], [0.9, 0.3]], requires_grad=True)
    before, results = kernels.threads(), []
    try:
        for count in (1, 2):
            kernels.set_num_threads(count)
            results.append((float(energy(params)), qml.grad(energy)(params)))
    finally:
        kernels.set_num_threads(before)
    tol = 1e-12 if precision == "c128" else 1e-5
    assert abs(results[0][0] - results[1][0]) < tol * 24
    np.testing.assert_allclose(results[0][1], results[1][1], atol=tol * 24)


def test_importing_qbackends_and_building_a_device_loads_no_jit_and_changes_no_environment():
    code = (
        "import os, sys; before = dict(os.environ); import qbackends; assert 'qbackends_native' not in sys.modules;"
        "dev = qbackends.get_device('local:qbackends/fused.qubit', wires=3); assert 'numba' not in sys.modules;"
        "assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items())"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_importing_the_kernels_and_building_the_devices_does_no_other_work(tmp_path):
    """No folder or file made (home, working folder, temporary folder, caches) beyond PennyLane's own, no log
    handler set up, no environment changed: importing the kernels' modules and building qbackends' devices
    only loads code."""
    places = {name: tmp_path / name for name in ("home", "cwd", "tmp", "cache")}
    for place in places.values():
        place.mkdir()
    code = (
        "import logging, os, sys; before = dict(os.environ); import qbackends;"
        "from qbackends.fused import kernels as f; from qbackends.batched import kernels as b; import qbackends_native;"
        "[qbackends.get_device(s, wires=3) for s in ('local:qbackends/fused.qubit', 'local:qbackends/batched.qubit', 'auto')];"
        "assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items());"
        "assert not logging.root.handlers and not logging.getLogger('qbackends').handlers"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("QBACKENDS_")},
        "HOME": str(places["home"]),
        "TMPDIR": str(places["tmp"]),
        "XDG_CACHE_HOME": str(places["cache"]),
    }

    def files() -> dict[str, list[str]]:
        return {name: sorted(str(p.relative_to(place)) for p in place.rglob("*")) for name, place in places.items()}

    # PennyLane's own import makes matplotlib's caches (pennylane.drawer imports it): made first, not counted.
    pennylane = "import pennylane as qml; qml.device('default.qubit', wires=3)"
    subprocess.run([sys.executable, "-c", pennylane], check=True, timeout=300, cwd=places["cwd"], env=env)
    before = files()
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, cwd=places["cwd"], env=env)
    assert files() == before
