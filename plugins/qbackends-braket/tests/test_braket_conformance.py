"""The plugin checked by qbackends' conformance kit, as any plugin author would check theirs."""

from qbackends.testing import check_backend


def test_braket_local_simulator_conforms(qbackends_registry):
    check_backend("local:braket/braket.local.qubit")
