"""The plugin checked by qbackends' conformance kit, as any plugin author would check theirs."""

from qbackends.testing import check_backend


def test_qulacs_simulator_conforms(qbackends_registry):
    check_backend("local:qulacs/qulacs.simulator")
