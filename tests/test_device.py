"""get_device with real PennyLane devices."""

from __future__ import annotations

import logging
import re

import numpy as np
import pennylane as qml
import pytest
from circuits import qaoa_qnode, random_params

import qbackends
from qbackends import get_device
from qbackends.context import get_context
from qbackends.errors import BackendUnavailableError, InsufficientMemoryError, UnsupportedOptionError

CPU_BACKENDS = ["lightning.qubit", "lightning.kokkos"]


@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_qaoa_value_and_adjoint_gradient_match_plain_device(name):
    params = random_params((2, 2))
    ours = qaoa_qnode(get_device(f"local:pennylane/{name}", wires=10), nodes=10, edges=15)
    plain = qaoa_qnode(qml.device(name, wires=10), nodes=10, edges=15)
    assert abs(ours(params) - plain(params)) < 1e-10
    np.testing.assert_allclose(qml.grad(ours)(params), qml.grad(plain)(params), atol=1e-10, rtol=0)
    assert ours.device.name == name


def test_auto_at_20_wires_weighs_the_cpu_backends_here():
    dev = get_device("auto", wires=20)
    assert dev.name == "qbackends.auto"
    assert {b.key for b in dev._candidates} >= {
        "pennylane/lightning.qubit",
        "pennylane/lightning.kokkos",
        "qbackends/fused.qubit",
    }
    assert qbackends.choose("auto", 20).backend.simulator == "lightning.kokkos"  # the preference order, by size


def test_no_argument_reads_braket_then_qbackends_env(monkeypatch):
    monkeypatch.setenv("QBACKENDS_DEVICE", "local:pennylane/default.qubit")
    assert get_device(wires=2).name == "default.qubit"
    monkeypatch.setenv("AMZN_BRAKET_DEVICE_ARN", "local:pennylane/lightning.qubit")
    assert get_device(wires=2).name == "lightning.qubit"


def test_forty_wires_refused_before_allocation_with_byte_counts():
    with pytest.raises(InsufficientMemoryError) as err:
        get_device("local:pennylane/lightning.qubit", wires=40)
    text = str(err.value)
    assert "40 wires on local:pennylane/lightning.qubit at c128 need" in text
    assert f"({9 * 16 * 2**40} bytes)" in text and f"({16 * 2**40} bytes) during an adjoint gradient" in text
    assert "precision='c64' halves the memory" in err.value.fix and "ignore_memory=True" in err.value.fix


def test_the_memory_advice_is_true_for_the_backend_at_hand():
    with pytest.raises(InsufficientMemoryError) as err:
        get_device("local:pennylane/lightning.qubit", wires=40, diff_method="parameter-shift")
    assert "during a parameter-shift gradient" in str(err.value)
    with pytest.raises(InsufficientMemoryError) as err:  # fused.qubit has c64 too
        get_device("local:qbackends/fused.qubit", wires=40)
    assert "during an adjoint gradient" in str(err.value) and "precision='c64' halves the memory" in err.value.fix
    with pytest.raises(InsufficientMemoryError) as err:  # asked at c64: sized at 8 bytes an amplitude, no c64 advice
        get_device("local:qbackends/fused.qubit", wires=40, precision="c64")
    assert (
        f"(2 state copies of 8.19e+03 GiB ({8 * 2**40} bytes), 1 byte an amplitude of tables during an adjoint gradient)"
        in str(err.value)
    )
    assert "precision='c64'" not in err.value.fix
    with pytest.raises(InsufficientMemoryError) as err:  # batched.qubit has c64 too
        get_device("local:qbackends/batched.qubit", wires=40)
    assert "precision='c64' halves the memory" in err.value.fix
    with pytest.raises(InsufficientMemoryError) as err:  # Braket's local simulator takes no c_dtype: no c64 advice
        get_device("local:braket/braket.local.qubit", wires=40)
    assert "precision='c64'" not in err.value.fix


def test_default_qubit_adjoint_guard_knows_the_dense_matrix():
    with pytest.raises(InsufficientMemoryError, match="dense 2\\^n x 2\\^n observable matrix"):
        get_device("local:pennylane/default.qubit", wires=18)
    assert get_device("local:pennylane/default.qubit", wires=18, diff_method="backprop").name == "default.qubit"


def test_explicit_gpu_fails_with_probe_reason_on_this_cpu_machine():
    with pytest.raises(BackendUnavailableError) as err:
        get_device("local:pennylane/lightning.gpu", wires=4)
    assert "local:pennylane/lightning.gpu cannot run here" in str(err.value)
    assert "pip install pennylane-lightning-gpu" in err.value.fix


def test_fallback_chain_builds_the_first_that_runs(caplog):
    with caplog.at_level(logging.WARNING, logger="qbackends"):
        dev = get_device(
            "local:pennylane/lightning.gpu",
            wires=4,
            fallback=["local:pennylane/lightning.amdgpu", "local:pennylane/lightning.kokkos", "local:pennylane/lightning.qubit"],
        )
    assert dev.name == "lightning.kokkos"
    assert len(caplog.records) == 1
    assert "using local:pennylane/lightning.kokkos instead of local:pennylane/lightning.gpu" in caplog.records[0].getMessage()


def test_options_pass_through_and_unknown_ones_are_named():
    dev = get_device("lightning.qubit", wires=3, batch_obs=True, seed=11)
    assert dev.name == "lightning.qubit"
    with pytest.raises(UnsupportedOptionError) as err:
        get_device("lightning.qubit", wires=3, mpi=True)
    assert "does not accept the option(s) mpi" in str(err.value)
    assert "batch_obs" in str(err.value) and "remove mpi" in err.value.fix


def test_precision_c64_gives_single_precision_state():
    dev = get_device("lightning.qubit", wires=2, precision="c64")

    @qml.qnode(dev)
    def state():
        qml.Hadamard(0)
        return qml.state()

    assert state().dtype == np.complex64
    with pytest.raises(UnsupportedOptionError, match="default.qubit has no precision option") as refused:
        get_device("default.qubit", wires=2, precision="c64")
    assert refused.value.fix == "drop precision, or use local:qbackends/fused.qubit or a lightning backend (c64 or c128)."
    with pytest.raises(UnsupportedOptionError, match="precision='c32' is not a precision"):
        get_device("lightning.qubit", wires=2, precision="c32")


def test_shots_pass_through():
    dev = get_device("lightning.qubit", wires=1, shots=100, seed=3)

    @qml.qnode(dev)
    def flip():
        qml.PauliX(0)
        return qml.sample(qml.PauliZ(0))

    assert np.all(flip() == -1) and len(flip()) == 100


def test_a_request_the_backend_refuses_is_the_requests_error():
    with pytest.raises(UnsupportedOptionError) as err:
        get_device("lightning.qubit", wires=2, seed="not-a-seed")
    assert str(err.value).startswith(
        "local:pennylane/lightning.qubit refused this request (wires=2, seed='not-a-seed'): TypeError: SeedSequence expects int"
    )
    # the user's error, not the backend's: it stays available, for auto too
    assert qbackends.choose("local:pennylane/lightning.qubit", 2).backend.simulator == "lightning.qubit"
    assert get_context().build_failures == {}


def test_bad_wires_do_not_disable_a_backend():
    """The attack's F1: repeated labels once made lightning.qubit 'broken' for the whole process."""
    with pytest.raises(UnsupportedOptionError, match=r"wires=\[0, 0, 1\] repeats 0; wire labels must be distinct"):
        get_device("local:pennylane/lightning.qubit", wires=[0, 0, 1])
    assert get_device("local:pennylane/lightning.qubit", wires=2).name == "lightning.qubit"
    assert "pennylane/lightning.qubit" in {b.key for b in get_device("auto", wires=2)._candidates}


@pytest.mark.parametrize(
    ("wires", "message"),
    [
        (-1, "wires=-1 is out of range (1 to 512): a device has at least one wire."),
        (0, "wires=0 is out of range (1 to 512): a device has at least one wire."),
        ([], "wires=[] names no wires; a device has at least one."),
        ((), "wires=() names no wires; a device has at least one."),
        (1_000_000_000, "wires=1000000000 is out of range (1 to 512)"),
        ("4", "wires='4' is not a number of wires or a list of labels"),
        (1.5, "wires=1.5 is not a whole number"),
        (True, "wires=True is not a number of wires or a list of labels"),
        ([[0], 1], "holds a label that is not hashable"),
    ],
)
def test_wires_are_validated_at_the_boundary(wires, message):
    with pytest.raises(UnsupportedOptionError, match=re.escape(message)):
        get_device("lightning.qubit", wires=wires)


def test_a_generator_of_labels_is_read_once_into_the_device():
    dev = get_device("lightning.qubit", wires=(w for w in "abc"))
    assert list(dev.wires) == ["a", "b", "c"]

    @qml.qnode(dev)
    def circuit():
        qml.PauliX("b")
        return qml.expval(qml.Z("b"))

    assert circuit() == -1.0


class _CountedLabel:
    """A wire label that counts how often it is compared."""

    comparisons = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        return self.n

    def __eq__(self, other: object) -> bool:
        _CountedLabel.comparisons += 1
        return isinstance(other, _CountedLabel) and other.n == self.n


def test_labels_are_counted_before_they_are_compared():
    _CountedLabel.comparisons = 0
    with pytest.raises(UnsupportedOptionError, match=re.escape("wires names 40000 labels; at most 512.")):
        get_device("lightning.qubit", wires=[_CountedLabel(n) for n in range(40000)])
    assert _CountedLabel.comparisons == 0  # pairwise comparisons took 15-37 s for this refusal
    with pytest.raises(UnsupportedOptionError, match=re.escape("repeats")):
        get_device("lightning.qubit", wires=[_CountedLabel(n % 500) for n in range(501)])
    assert _CountedLabel.comparisons < 10  # hashed once each, not compared pairwise


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"precision": ["c64"]}, "precision=['c64'] is not a precision qbackends knows; choices: c64, c128."),
        ({"fallback": "lightning.qubit"}, "fallback='lightning.qubit' is not a list of device strings."),
        ({"ignore_memory": "no"}, "ignore_memory='no' is not True or False."),
        ({"diff_method": 123}, "diff_method=123 is not a differentiation method; choices: best, device, backprop, adjoint,"),
        ({"diff_method": ""}, "diff_method='' is not a differentiation method"),
    ],
)
def test_options_of_the_wrong_type_are_named(option, message):
    with pytest.raises(UnsupportedOptionError, match=re.escape(message)):
        get_device("lightning.qubit", wires=2, **option)
    with pytest.raises(UnsupportedOptionError, match=re.escape(message)):
        qbackends.choose("lightning.qubit", 2, **option)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"decompositions": ["MultiRZ"]}, "decompositions=['MultiRZ'] is not a mapping of operator to rule."),
        ({"default_decompositions": 0}, "default_decompositions=0 is not True or False."),
    ],
)
def test_rule_options_of_the_wrong_type_are_named(option, message):
    with pytest.raises(UnsupportedOptionError, match=re.escape(message)):
        get_device("lightning.qubit", wires=2, **option)


def test_numpy_integers_are_wire_counts():
    assert len(get_device("lightning.qubit", wires=np.int64(4)).wires) == 4
    assert len(get_device("auto", wires=np.int32(3)).wires) == 3


def test_fallback_is_tried_after_a_construction_failure():
    dev = get_device("local:fixture/failing.qubit", wires=2, fallback=["local:pennylane/lightning.qubit"])
    assert dev.name == "lightning.qubit"
    assert get_context().build_failures == {
        "failing.qubit": "RuntimeError: Error in PennyLane Lightning: CUDA driver version is insufficient for CUDA runtime version"
    }


def test_an_error_about_a_string_from_the_environment_says_where_it_came_from(monkeypatch):
    monkeypatch.setenv("AMZN_BRAKET_DEVICE_ARN", "local:pennylane/nosuch")
    with pytest.raises(qbackends.UnknownBackendError, match=r"\(the device string came from AMZN_BRAKET_DEVICE_ARN\)\."):
        get_device(wires=2)


def test_results_honour_the_umask(tmp_path):
    import os

    from qbackends.storage import atomic_write_json

    old = os.umask(0o022)
    try:
        path = atomic_write_json(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_an_mpi_rank_is_sized_at_what_a_rank_holds():
    """fused.qubit: one process at its state_copies and table_bytes (ψ and λ, and a cost's 1-byte levels), a rank of
    mpi=True at its rank_state_copies and rank_table_bytes (the levels in each of the two bit layouts the exchanges
    alternate between): the least a circuit needs; the device sizes a weighted cost's diagonals when it runs one."""
    from qbackends import capabilities

    fused = get_context().registry.backends["qbackends/fused.qubit"]
    assert (fused.copies(), fused.table_bytes, fused.copies(mpi=True), fused.rank_table_bytes) == (2.0, 1, 2.0, 2)
    room = (
        150 << 20
    )  # 22 wires: one process 2 states and 4 MiB of levels (132 MiB), a rank 8 MiB of tables and a 16 MiB piece (152)
    assert capabilities.max_wires(fused, room) == 22 and capabilities.max_wires(fused, room, mpi=True) == 21
    lightning = get_context().registry.backends["pennylane/lightning.qubit"]  # declares no rank figure
    assert lightning.copies(mpi=True) == lightning.copies() == 9.0
    from qbackends.launchers import Launch
    from qbackends.screening import ranks_share_state

    with pytest.raises(InsufficientMemoryError) as err:  # one rank (no launcher here): one state, one layout's levels
        get_device("local:qbackends/fused.qubit", wires=40, mpi=True)
    text = str(err.value)
    assert "the one state of this node's ranks (40 wires) on local:qbackends/fused.qubit at c128" in text
    assert f"({2 * 16 * 2**40 + (1 << 40)} bytes) (2 state copies of" in text
    assert ", 1 byte an amplitude of tables during an adjoint gradient" in text
    on_one_node, across_nodes = Launch("mpiexec (MPICH)", 0, 4, 0, 4, "127.0.0.1", 29500), Launch("srun", 0, 4, 0, 1, "n1", 29500)
    assert ranks_share_state({"mpi": True}, on_one_node)
    assert not ranks_share_state({"mpi": True, "share_node": False}, on_one_node)
    assert not ranks_share_state({"mpi": True}, across_nodes)
    assert not ranks_share_state({}, on_one_node)
    from qbackends.fused import distributed

    assert fused.rank_buffer_bytes == distributed.EXCHANGE_PIECE_BYTES  # the exchange's receiving piece


def test_a_node_of_ranks_is_sized_with_each_ranks_buffer():
    """Two ranks on a node: their shares' copies and a buffer each, at most half a rank's share (its exchange piece)."""
    from qbackends import capabilities

    fused = get_context().registry.backends["qbackends/fused.qubit"]
    share = 32 << 20  # a 21-wire share at c128: two of them are 22 wires' worth
    assert capabilities.working_set_bytes(fused, 22, mpi=2) == 2 * 2 * share + (2 << 22) + 2 * (16 << 20)
    assert capabilities.working_set_bytes(fused, 20, mpi=2) == 2 * (16 << 20) + (2 << 20) + 2 * (
        4 << 20
    )  # half of an 8 MiB share
    assert capabilities.working_set_bytes(fused, 30, mpi=2) == 2 * 16 * 2**30 + (2 << 30) + 2 * (16 << 20)
    assert capabilities.working_set_bytes(fused, 30) == 2 * 16 * 2**30 + (1 << 30)  # one process: no exchange
    assert capabilities.working_set_bytes(fused, 30, "c64") == 2 * 8 * 2**30 + (1 << 30)  # 17 GiB: fits 24 GiB machines
    # ranks sharing one state: ψ and λ once for the node, the levels of one layout, no pieces
    assert capabilities.working_set_bytes(fused, 22, mpi=2, shared=True) == 2 * (16 << 22) + (1 << 22)
    assert capabilities.working_set_bytes(fused, 22, "c64", mpi=2, shared=True) == 2 * (8 << 22) + (1 << 22)


def test_mpi_is_refused_where_the_build_cannot_do_it_and_sized_per_process(monkeypatch):
    from qbackends import probe

    assert probe.mpi_support(get_context().registry.backends["pennylane/lightning.kokkos"]) == (
        False,
        "this lightning.kokkos build has no MPI support (the PyPI wheels are built without it)",
    )  # the PyPI wheel installed here
    assert probe.mpi_world_size({"OMPI_COMM_WORLD_SIZE": "4"}) == 4 and probe.mpi_world_size({}) == 1
    too_big = qbackends.choose("lightning.kokkos", 8).capabilities.max_wires + 1
    with pytest.raises(InsufficientMemoryError):  # one process would hold the whole state
        get_device("lightning.kokkos", wires=too_big, mpi=True)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")  # four processes: a quarter each, so it fits
    with pytest.raises(UnsupportedOptionError, match=r"^mpi=True cannot work on local:pennylane/lightning.kokkos: this"):
        get_device("lightning.kokkos", wires=too_big, mpi=True)


def test_ranks_sharing_a_state_are_sized_against_the_room_in_dev_shm(monkeypatch):
    """mpi=True with the ranks of one node sharing the state (one rank alone here): get_device sizes it against the
    room in /dev/shm (a container's 64 MiB, recorded as the probe would read it) when that is less than the memory
    available, and names it with its fixes; with room, the device is built."""
    from qbackends import probe

    monkeypatch.setattr(probe, "shared_memory_available", lambda: 64 << 20)
    with pytest.raises(InsufficientMemoryError) as refused:
        get_device("local:qbackends/fused.qubit", wires=24, mpi=True)
    assert str(refused.value).startswith(
        "the one state of this node's ranks (24 wires) on local:qbackends/fused.qubit at c128 need 0.516 GiB (553648128 bytes) "
        "(2 state copies of 0.25 GiB (268435456 bytes), 1 byte an amplitude of tables during an adjoint gradient) but "
        "/dev/shm, where the ranks of this node share the state, has 0.0625 GiB (67108864 bytes) available."
    )
    assert refused.value.fix.startswith(
        "give /dev/shm more room (in a container: docker run --shm-size) or pass share_node=False (each rank then holds "
        "its share in its own memory); use at most 20 wires;"
    )
    assert get_device("local:qbackends/fused.qubit", wires=20, mpi=True).name == "qbackends.fused.qubit"
    monkeypatch.setattr(probe, "shared_memory_available", lambda: 1 << 40)  # room: the node's memory decides
    assert get_device("local:qbackends/fused.qubit", wires=24, mpi=True).name == "qbackends.fused.qubit"
