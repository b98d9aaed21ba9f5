"""``qbackends.fused.qubit``: a PennyLane device that fuses diagonal gates and single-qubit layers.

Any QNode runs on it unchanged: PennyLane's preprocessing lowers other gates to the supported set,
rotates measurements to the Z basis, and expands parameter broadcasting.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.devices import Device, ExecutionConfig
from pennylane.devices.preprocess import decompose, validate_device_wires, validate_measurements
from pennylane.measurements import ExpectationMP, ProbabilityMP, StateMP, VarianceMP

from ..errors import UnsupportedOptionError
from . import engine
from .program import SUPPORTED, compile_operations, z_terms


def _analytic(m: Any) -> bool:
    return isinstance(m, (ExpectationMP, VarianceMP, ProbabilityMP, StateMP))


def _diagonal_already(m: Any) -> bool:
    return m.obs is None or z_terms(m.obs) is not None


@qml.transform
def to_z_basis(tape: Any) -> tuple[Any, Any]:
    """Measure in the Z basis: sums of Z products stay one observable (one diagonal, one adjoint
    pass); anything else is split into commuting groups and rotated."""
    if all(_diagonal_already(m) for m in tape.measurements):
        return (tape,), lambda results: results[0]
    tapes, split = qml.transforms.split_non_commuting(tape)
    rotated, fns = [], []
    for t in tapes:
        (r,), fn = qml.transforms.diagonalize_measurements(t, supported_base_obs={qml.Z, qml.Identity})
        rotated.append(r)
        fns.append(fn)
    return rotated, lambda results: split([fn((res,)) for fn, res in zip(fns, results, strict=True)])


@qml.transform
def diagonal_evolutions(tape: Any) -> tuple[Any, Any]:
    """exp(-i t Σ h Z..Z) -> Π MultiRZ(2 h t): the terms then join one diagonal block.

    PennyLane has no decomposition for the evolution of a multi-term Hamiltonian; for a diagonal
    one it is exact (the terms commute), and t stays differentiable through the new parameters.
    """
    if not any(op.name == "Evolution" for op in tape.operations):
        return (tape,), lambda results: results[0]
    ops = []
    for op in tape.operations:
        terms = z_terms(op.base) if op.name == "Evolution" else None
        if terms is None:
            ops.append(op)
            continue
        t = op.data[0]
        for wires, h in terms:
            ops.append(qml.MultiRZ(2 * h * t, wires=wires) if wires else qml.GlobalPhase(h * t, wires=op.wires))
    return (tape.copy(operations=ops),), lambda results: results[0]


class FusedQubit(Device):
    """State-vector simulator for circuits dominated by diagonal gates (QAOA, Ising evolutions).

    Args:
        wires: number of wires or their labels.
    """

    name = "qbackends.fused.qubit"
    config_filepath = Path(__file__).with_name("fused_qubit.toml")

    def __init__(self, wires: Any = None) -> None:
        if wires is None:
            raise UnsupportedOptionError("qbackends.fused.qubit needs wires.", "pass wires=n to get_device.")
        super().__init__(wires=wires)
        self._diagonals = engine.DiagonalCache()
        self._scratch: dict[str, np.ndarray] = {}  # reused state buffers: no page faults per execution

    def _buffer(self, name: str, size: int) -> np.ndarray:
        buf = self._scratch.get(name)
        if buf is None or buf.size != size:
            buf = self._scratch[name] = np.empty(size, dtype=complex)
        return buf

    # ---- preprocessing ----------------------------------------------------------------------

    def preprocess_transforms(self, execution_config: ExecutionConfig | None = None) -> Any:
        pipeline = qml.CompilePipeline()
        pipeline.add_transform(validate_device_wires, self.wires, name=self.name)
        pipeline.add_transform(
            validate_measurements, analytic_measurements=_analytic, sample_measurements=lambda m: False, name=self.name
        )
        pipeline.add_transform(to_z_basis)
        pipeline.add_transform(diagonal_evolutions)
        pipeline.add_transform(decompose, stopping_condition=lambda op: op.name in SUPPORTED, name=self.name)
        pipeline.add_transform(qml.transforms.broadcast_expand)
        return pipeline

    def setup_execution_config(self, config: ExecutionConfig | None = None, circuit: Any = None) -> ExecutionConfig:
        config = config or ExecutionConfig()
        if config.gradient_method in ("best", "adjoint", "device"):
            return dataclasses.replace(config, gradient_method="adjoint", use_device_gradient=True, grad_on_execution=True)
        return config

    def supports_derivatives(self, execution_config: ExecutionConfig | None = None, circuit: Any = None) -> bool:
        if execution_config is None or execution_config.gradient_method not in ("adjoint", "best", "device"):
            return False
        return circuit is None or all(isinstance(m, ExpectationMP) for m in circuit.measurements)

    # ---- execution --------------------------------------------------------------------------

    def execute(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return tuple(self._simulate(tape)[0] for tape in circuits)

    def execute_and_compute_derivatives(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        results, jacobians = (
            zip(*(self._simulate(tape, gradient=True) for tape in circuits), strict=True) if circuits else ((), ())
        )
        return tuple(results), tuple(jacobians)

    def compute_derivatives(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self.execute_and_compute_derivatives(circuits, execution_config)[1]

    def _simulate(self, tape: Any, gradient: bool = False) -> tuple[Any, Any]:
        n = len(self.wires)
        index = {w: i for i, w in enumerate(self.wires)}
        segments, nparams = compile_operations(tape.operations, index, n)
        psi = engine.forward(segments, n, self._buffer("psi", 1 << n))
        values = []
        jac_rows = []
        for m in tape.measurements:
            if isinstance(m, StateMP):
                values.append(psi.copy())
            elif isinstance(m, ProbabilityMP):
                values.append(_probabilities(psi, [index[w] for w in (m.wires or self.wires)], n))
            else:
                diagonal = self._diagonal(m.obs, index, n)
                if isinstance(m, VarianceMP):
                    p = np.abs(psi) ** 2
                    values.append(np.array(p @ diagonal**2 - (p @ diagonal) ** 2))
                elif gradient:
                    lam = self._buffer("lambda", psi.size)
                    values.append(np.array(engine.K.expval_and_lambda(psi, diagonal, lam)))
                    phi = psi
                    if len(tape.measurements) > 1:  # keep ψ for the next measurement
                        phi = self._buffer("phi", psi.size)
                        phi[:] = psi
                    jac_rows.append(engine.adjoint_gradient(segments, nparams, phi, lam, n)[list(tape.trainable_params)])
                else:
                    values.append(np.array(engine.K.expval(psi, diagonal)))
        result = values[0] if len(values) == 1 else tuple(values)
        if not gradient:
            return result, None
        return result, _format_jacobian(np.array(jac_rows))

    def _diagonal(self, obs: Any, index: dict, n: int) -> np.ndarray:
        terms = z_terms(obs)
        if terms is None:
            raise UnsupportedOptionError(
                f"qbackends.fused.qubit measures sums of Pauli-Z products; got {obs}.",
                "measure Z-basis observables (others are rotated when they commute).",
            )
        masks = np.array([sum(1 << (n - 1 - index[w]) for w in wires) for wires, _ in terms], dtype=np.int64)
        coefs = np.array([h for _, h in terms])
        return self._diagonals.get(n, masks, coefs)


def _probabilities(psi: np.ndarray, wires: list[int], n: int) -> np.ndarray:
    p = (np.abs(psi) ** 2).reshape([2] * n)
    others = tuple(i for i in range(n) if i not in wires)
    marginal = p.sum(axis=others) if others else p
    order = sorted(wires)
    marginal = np.transpose(marginal, [order.index(w) for w in wires])
    return marginal.reshape(-1)


def _format_jacobian(jac: np.ndarray) -> Any:
    """PennyLane's shape for a device Jacobian: squeezed; a tuple per measurement and per parameter."""
    jac = np.squeeze(jac)
    if jac.ndim == 0:
        return np.array(jac)
    if jac.ndim == 1:
        return tuple(np.array(j) for j in jac)
    return tuple(tuple(np.array(j_) for j_ in j) for j in jac)
