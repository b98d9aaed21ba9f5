"""The PennyLane device both simulators are: preprocessing, adjoint gradients asked for by name, tracking.

A subclass brings its engine: its preprocessing steps, execution, and the hooks below. PennyLane's
``simulator_tracking`` modifier is not used: it counts by its own rules (``simulations``,
``execute_and_derivative_batches``), and cannot see what a batch cost (fused.qubit's ``bytes_moved``).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.devices import Device, ExecutionConfig
from pennylane.devices.capabilities import validate_mcm_method
from pennylane.devices.preprocess import decompose, validate_device_wires

from ..errors import UnsupportedOptionError
from ..shiftrules import (
    hadamard_refusal,
    method_name,
    misread_by_hadamard,
    no_shift_rule,
    refusal,
    shifted,
    standard_hadamard,
    unshiftable,
)
from .measured import check_declared, refuse_undeclared

ADJOINT_METHODS = ("adjoint", "best", "device")  # the gradient methods the engine's adjoint pass answers


def state_dtype(c_dtype: Any, device_name: str) -> np.dtype:
    """A device's amplitudes' dtype from its ``c_dtype`` option: complex128 or complex64, else a typed error."""
    try:
        dtype = np.dtype(c_dtype)
    except TypeError:
        dtype = None
    if dtype not in (np.complex64, np.complex128):
        raise UnsupportedOptionError(
            f"{device_name} has no c_dtype {c_dtype!r}; choices: numpy.complex128, numpy.complex64.",
            "pass c_dtype=numpy.complex64 (or precision='c64' to get_device) for half the memory, or leave it out.",
        )
    return dtype


class SimulatorDevice(Device):
    """A qbackends simulator as a PennyLane device.

    Hooks for the engine: ``_add_engine_transforms`` (its preprocessing), ``_gradient_options`` (how
    it delivers adjoint gradients) and ``_differentiates`` (which circuits it can).
    """

    def preprocess_transforms(self, execution_config: ExecutionConfig | None = None) -> Any:
        """Mid-circuit measurements deferred (onto wires of their own), the circuit's wires checked against the
        device's, measurements the TOML does not declare refused by name, then the engine's own steps."""
        pipeline = qml.CompilePipeline()
        pipeline.add_transform(qml.defer_measurements, allow_postselect=False)  # the one method (setup_execution_config)
        pipeline.add_transform(validate_device_wires, self.wires, name=self.name)
        pipeline.add_transform(refuse_undeclared, device=self.name, declared=self.capabilities.measurement_processes)
        self._add_engine_transforms(pipeline)
        return pipeline

    @abc.abstractmethod
    def _add_engine_transforms(self, pipeline: Any) -> None:
        """Add the engine's preprocessing to ``pipeline``: its refusals, rewrites, and ``_lower``."""

    def _lower(self, pipeline: Any, runs: Callable[[Any], bool]) -> None:
        """Add to ``pipeline`` the decomposition of every operation, state preparations too, until ``runs`` takes it."""
        pipeline.add_transform(decompose, stopping_condition=runs, skip_initial_state_prep=False, name=self.name)

    def setup_execution_config(self, config: ExecutionConfig | None = None, circuit: Any = None) -> ExecutionConfig:
        """Measurements not declared refused; mid-circuit measurements deferred; no parameter-shift of the state
        (``shiftrules``); adjoint, device, and best for an analytic circuit: the engine's adjoint pass."""
        config = config or ExecutionConfig()
        sampled = circuit is not None and bool(circuit.shots)
        if circuit is not None:  # refused here too, before an ML interface runs preprocessing (jax.jit: in a callback)
            check_declared(circuit, self.name, self.capabilities.measurement_processes)
        # mid-circuit measurements: deferred, the one method the engines have (another asked for is refused)
        validate_mcm_method(self.capabilities, config.mcm_config.mcm_method, sampled)
        if config.mcm_config.mcm_method is None:
            config = dataclasses.replace(config, mcm_config=dataclasses.replace(config.mcm_config, mcm_method="deferred"))
        if shifted(config.gradient_method) and (reason := unshiftable(circuit)):
            raise refusal(self.name, reason, f"{method_name(config.gradient_method)} was asked for")
        if standard_hadamard(config) and (reason := misread_by_hadamard(circuit)):
            raise hadamard_refusal(self.name, reason)
        if config.gradient_method in ("adjoint", "device") or (config.gradient_method == "best" and not sampled):
            options = self._gradient_options(circuit)
            if circuit is not None and not self._differentiates(circuit):  # values first; a gradient asked for is refused
                options["grad_on_execution"] = False
            return dataclasses.replace(config, gradient_method="adjoint", use_device_gradient=True, **options)
        return config

    def supports_derivatives(self, execution_config: ExecutionConfig | None = None, circuit: Any = None) -> bool:
        if execution_config is not None and execution_config.gradient_method not in ADJOINT_METHODS:
            return False
        # what parameter-shift cannot take stays here (see shiftrules): its gradient is refused typed when asked for
        return circuit is None or self._differentiates(circuit) or (not circuit.shots and no_shift_rule(circuit) is not None)

    def differentiates(self, circuit: Any) -> bool:
        """Whether the engine's own (adjoint) gradient takes ``circuit``."""
        return self._differentiates(circuit)

    def _refuse_undifferentiated(self, tapes: Any) -> None:
        """Refuse, typed, a gradient of what the engine's adjoint pass does not differentiate."""
        from ..errors import UnsupportedCircuitError

        for tape in tapes:
            if self._differentiates(tape):
                continue
            how = f"its adjoint pass differentiates {self.differentiated} only"
            if reason := no_shift_rule(tape):
                raise refusal(self.name, reason, how)
            raise UnsupportedCircuitError(
                f"{self.name} has no adjoint gradient of {', '.join(map(str, tape.measurements))}: {how}.",
                "use diff_method='parameter-shift' or 'best' (PennyLane then shifts the parameters).",
            )

    def _gradient_options(self, circuit: Any) -> dict[str, Any]:
        """``ExecutionConfig`` fields for the engine's adjoint gradients of ``circuit`` (None: of any)."""
        return {}

    differentiated = "expectations of observables"  # what ``_differentiates`` takes, in words

    def _differentiates(self, circuit: Any) -> bool:
        """Whether the engine's adjoint pass differentiates ``circuit``."""
        return True

    # ---- PennyLane's tracker ----------------------------------------------------------------

    def _track(self, **counts: Any) -> None:
        """One update of the tracker, when one is active."""
        if self.tracker.active:
            self.tracker.update(**counts)
            self.tracker.record()

    def _track_tape(self, tape: Any, **counts: Any) -> None:
        """One circuit run: an execution, with its resources (counted only when a tracker is active)."""
        if self.tracker.active:
            self._track(executions=1, **counts, resources=tape.specs["resources"])
