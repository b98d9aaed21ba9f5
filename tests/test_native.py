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
    assert qbackends_native.ARCH  # QBACKENDS_ARCH at build time: native unless a baseline was stated
    assert qbackends_native.VECTOR_ISA in ("avx512f", "avx2", "avx", "sse2", "generic")


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
