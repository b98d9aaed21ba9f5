"""qbackends provider ``braket``: ``local:braket/braket.local.qubit``, the device string a Braket user writes."""

from __future__ import annotations

from collections.abc import Callable

from qbackends import Backend, hookimpl

LOCAL_QUBIT = Backend(
    provider="braket",
    simulator="braket.local.qubit",
    device_name="braket.local.qubit",
    distribution="amazon-braket-pennylane-plugin",
    hardware="cpu",
    state_copies=4.0,
    preference=-1,  # a reference for Braket users; never chosen by auto (slower than Lightning)
    description="Amazon Braket's local state-vector simulator (amazon-braket-default-simulator)",
)


@hookimpl
def register_backends(register: Callable[[Backend], None]) -> None:
    register(LOCAL_QUBIT)
