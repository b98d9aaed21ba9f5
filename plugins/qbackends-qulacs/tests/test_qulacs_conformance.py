"""The plugin checked by qbackends' conformance kit, as any plugin author would check theirs."""

from qbackends.testing import check_backend


def test_qulacs_simulator_conforms(qbackends_registry):
    check_backend("local:qulacs/qulacs.simulator")


def test_a_shot_vector_gives_one_result_per_entry(qbackends_registry):
    import numpy as np
    import pennylane as qml

    from qbackends import get_device

    @qml.qnode(get_device("local:qulacs/qulacs.simulator", wires=2, shots=[5, (50, 2)]))
    def circuit():
        qml.X(0)  # a certain outcome: every entry's estimate is exact
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1)), qml.probs(wires=[0])

    # PennyLane 0.45's legacy-device path failed on it with TypeError: iteration over a 0-d array
    results = circuit()
    assert len(results) == 3
    for value, probs in results:
        assert value == -1.0 and np.array_equal(probs, [0.0, 1.0])
