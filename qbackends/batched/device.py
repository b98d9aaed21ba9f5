"""``qbackends.batched.qubit``: a PennyLane device that runs a parameter-broadcast circuit as one batch.

B inputs with shared weights (a QML minibatch) are B rows of one state table, run by one program in
one call, and the adjoint pass returns the vector-Jacobian product for the broadcast inputs and the
shared weights together. Small circuits are all overhead on other simulators (each broadcast row
is its own tape); here the whole minibatch costs one pass over B small states.

Analytic only: expectations and variances of Pauli words and sums of them, probabilities, the state, and from it
what PennyLane computes of a state (reduced density matrices, entropies, purity, matrix observables). Gradients
(VJPs) of expectations and variances of Pauli observables and of probabilities of wires.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.devices import ExecutionConfig
from pennylane.math import Interface
from pennylane.measurements import ExpectationMP, ProbabilityMP, StateMP, VarianceMP

from ..errors import UnsupportedCircuitError
from ..simbase.device import SimulatorDevice, state_dtype
from ..simbase.gradients import refuse_trainable_coefficients
from ..simbase.measured import variances_as_expectations
from ..simbase.measurements import by_pennylane, marginal_index, probabilities
from . import kernels
from .program import NAME, Program, is_native, lower, pauli_terms, structure

KEPT_STATE_BYTES = 64 << 20  # an execution's final states kept for its VJP up to this size
KEPT_PROGRAMS = 64  # lowered programs a device keeps, the latest structures


def _lowered(operations: Any, wires: Any, programs: dict[tuple, Program] | None) -> Program:
    """``lower(operations, wires)``, from ``programs`` where the structure was lowered before (a training loop runs
    one structure at new parameters every step)."""
    if programs is None:
        return lower(operations, wires)
    key = structure(operations, wires)
    if key is None:
        return lower(operations, wires)
    program = programs.pop(key, None)
    if program is None:
        program = lower(operations, wires)
    programs[key] = program  # the latest last
    while len(programs) > KEPT_PROGRAMS:
        del programs[next(iter(programs))]
    return program


def _same_operations(ours: Any, theirs: Any) -> bool:
    """Whether two operation lists are the same gates on the same wires with the same parameters: exactly, and only
    where each gate's settings are plain values (otherwise: not known to be the same)."""
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs, strict=True):
        if type(a) is not type(b) or a.wires != b.wires or len(a.data) != len(b.data):
            return False
        if (a.hyperparameters or b.hyperparameters) and not _same_setting(a.hyperparameters, b.hyperparameters):
            return False
        for x, y in zip(a.data, b.data, strict=True):
            if not np.array_equal(qml.math.toarray(x), qml.math.toarray(y)):
                return False
    return True


def _same_setting(a: Any, b: Any) -> bool:
    """Equal gate settings: plain values, wires, operators (a controlled gate's base) and containers of them."""
    if isinstance(a, (str, int, float, bool, type(None), qml.wires.Wires)):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_setting(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_setting(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, qml.operation.Operator):
        return isinstance(b, qml.operation.Operator) and _same_operations([a], [b])
    return False


def _pauli(obs: Any) -> bool:
    return obs is not None and obs.pauli_rep is not None


def _own_path(m: Any) -> bool:
    """The measurements the kernels take and differentiate: expectations of Pauli observables, probabilities of wires."""
    if type(m) is ExpectationMP:
        return _pauli(m.obs)
    return type(m) is ProbabilityMP and m.obs is None and m.mv is None


class BatchedQubit(SimulatorDevice):
    """State-vector simulator for parameter-broadcast circuits (QML minibatches), with adjoint VJPs.

    Args:
        wires: number of wires or their labels; None takes the wires of each circuit.
    """

    name = NAME
    config_filepath = Path(__file__).with_name("batched_qubit.toml")

    def __init__(self, wires: Any = None, c_dtype: Any = np.complex128) -> None:
        """
        Args:
            wires: the device's wires.
            c_dtype: ``numpy.complex128`` (default) or ``numpy.complex64``: half the memory of the states; gates,
                sums and gradients stay in float64.
        """
        super().__init__(wires=wires)
        self.dtype = state_dtype(c_dtype, self.name)
        self._executed: list[Run] = []  # the last execution's runs, for a VJP of the same circuits (``_again``)
        self._programs: dict[tuple, Program] = {}  # lowered programs by circuit structure, the latest KEPT_PROGRAMS

    def preprocess_transforms(self, execution_config: ExecutionConfig | None = None) -> Any:
        pipeline = super().preprocess_transforms(execution_config)
        if (
            execution_config is not None
            and execution_config.interface == Interface.JAX_JIT
            and execution_config.use_device_gradient
        ):
            # Under jax.jit PennyLane differentiates by Jacobians shaped for unbroadcast tapes: one row per tape.
            pipeline.add_transform(qml.transforms.broadcast_expand)
        return pipeline

    def _add_engine_transforms(self, pipeline: Any) -> None:
        pipeline.add_transform(variances_as_expectations)  # finite shots are refused by refuse_undeclared
        self._lower(pipeline, is_native)

    def _gradient_options(self, circuit: Any) -> dict[str, Any]:
        # Gradients as VJPs: a broadcast input is a (B,) parameter, which a Jacobian cannot carry.
        return {"use_device_jacobian_product": True, "grad_on_execution": False}

    def supports_vjp(self, execution_config: ExecutionConfig | None = None, circuit: Any = None) -> bool:
        return self.supports_derivatives(execution_config, circuit)

    differentiated = "expectations and variances of Pauli observables and probabilities of wires"

    def _differentiates(self, circuit: Any) -> bool:
        """Expectations (and, as two expectations, variances) of Pauli observables, probabilities of wires."""
        return all(_own_path(m) or (type(m) is VarianceMP and _pauli(m.obs)) for m in circuit.measurements)

    # ---- execution --------------------------------------------------------------------------

    def execute(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        runs = [self._run(tape) for tape in circuits]
        results = tuple(run.results() for run in runs)
        kept = sum(run.states.nbytes for run in runs) <= KEPT_STATE_BYTES
        self._executed = runs if kept and execution_config is not None and execution_config.use_device_jacobian_product else []
        self._track(batches=1, batch_len=len(circuits))
        return results

    def compute_vjp(self, circuits: Any, cotangents: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self._vjps([self._again(tape) or self._run(tape) for tape in circuits], cotangents)

    def _again(self, tape: Any) -> Run | None:
        """The last execution's run of the same operations at the same parameters, for ``tape``'s measurements: a
        training step's backward pass asks for the VJP of the circuits its forward pass just ran (as new tapes)."""
        wires = self.wires if self.wires is not None else tape.wires
        for run in self._executed:
            if run.wires == wires and _same_operations(run.tape.operations, tape.operations):
                self._track_tape(tape, batch_len=run.batch)
                return run.measuring(tape)
        return None

    def execute_and_compute_vjp(self, circuits: Any, cotangents: Any, execution_config: ExecutionConfig | None = None) -> Any:
        self._executed = []
        runs = [self._run(tape) for tape in circuits]  # one forward pass each, for the values and the VJP
        results = tuple(run.results() for run in runs), self._vjps(runs, cotangents)
        self._track(batches=1, batch_len=len(circuits))
        return results

    def _vjps(self, runs: list[Run], cotangents: Any) -> tuple[Any, ...]:
        self._refuse_undifferentiated([run.tape for run in runs])
        vjps = tuple(run.vjp(cotangent) for run, cotangent in zip(runs, cotangents, strict=True))
        self._track(vjp_batches=1, vjps=len(runs))
        return vjps

    def _run(self, tape: Any) -> Run:
        run = Run(tape, self.wires, self._programs, self.dtype)
        self._track_tape(tape, batch_len=run.batch)
        return run

    def compute_derivatives(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        self._refuse_undifferentiated(circuits)
        return tuple(Run(tape, self.wires, dtype=self.dtype).jacobian() for tape in circuits)


class Run:
    """One tape on the kernels: its program, its parameter table, its final states."""

    def __init__(self, tape: Any, wires: Any, programs: dict[tuple, Program] | None = None, dtype: Any = complex) -> None:
        self.tape = tape
        self.wires = wires if wires is not None else tape.wires
        self.program: Program = _lowered(tape.operations, self.wires, programs)
        values = tape.get_parameters(trainable_only=False)
        self.broadcast = tape.batch_size is not None
        self.batch = tape.batch_size or 1
        self.params = np.zeros((self.batch, self.program.nslots))
        for slot, index in enumerate(self.program.slot_param):
            self.params[:, slot] = np.real(qml.math.toarray(values[index]))
        self.states = initial_states(self.batch, len(self.wires), dtype)
        kernels.forward(self.states, self.program.ops, self.program.groups, self.params, self.program.matrices)

    def measuring(self, tape: Any) -> Run:
        """This run's final states, measured as ``tape`` measures them (``tape``'s operations are this run's)."""
        run = copy.copy(self)
        run.tape = tape
        return run

    def results(self) -> Any:
        values = [self._measure(m) for m in self.tape.measurements]
        return values[0] if len(values) == 1 else tuple(values)

    def _measure(self, m: Any) -> np.ndarray:
        if type(m) is StateMP:
            out = self.states * self._global_phase()
        elif type(m) is ProbabilityMP and m.obs is None and m.mv is None:
            out = probabilities(self.states, [self.wires.index(w) for w in (m.wires or self.wires)], len(self.wires))
        elif _own_path(m):
            out = pauli_terms(m.obs, self.wires).expvals(self.states)
        else:  # see by_pennylane
            return by_pennylane(m, self.states if self.broadcast else self.states[0], self.wires, batched=self.broadcast)
        return out if self.broadcast else out[0]

    def _global_phase(self) -> np.ndarray:
        """e^(-i Σφ) per row, of the GlobalPhase gates the program drops: the state has it, nothing measured of it does."""
        total = np.zeros(self.batch)
        for op in self.tape.operations:
            if op.name == "GlobalPhase":
                total = total + np.real(qml.math.toarray(op.data[0]))
        return np.exp(-1j * total)[:, None]

    def vjp(self, cotangent: Any) -> tuple[Any, ...]:
        """Σ_m cotangent_m · d(result_m)/d(trainable parameters), one adjoint pass for all of them."""
        measurements = self.tape.measurements
        cotangents = (cotangent,) if len(measurements) == 1 else tuple(cotangent)
        n = len(self.wires)
        lam = np.zeros_like(self.states)
        for m, dy in zip(measurements, cotangents, strict=True):
            dy = np.asarray(qml.math.toarray(dy), dtype=float).reshape(self.batch, -1)
            if not _own_path(m):
                raise UnsupportedCircuitError(
                    f"{NAME} differentiates expectations and variances of Pauli observables and probabilities of wires, not {m}.",
                    "return those from a differentiated circuit, or use diff_method='parameter-shift' or another backend.",
                )
            if type(m) is ProbabilityMP:  # d Σ_k dy_k p_k = <ψ|diag(dy[marginal index])|ψ>
                axes, size = [self.wires.index(w) for w in (m.wires or self.wires)], 1 << n
                piece = max(1 << 14, size >> 6)  # the index and weights a piece at a time: no whole-state temporary
                weights = dy.astype(self.states.real.dtype)  # in the states' precision
                for start in range(0, size, piece):
                    part = slice(start, min(start + piece, size))
                    weight = weights[:, marginal_index(axes, n, part.start, part.stop)]
                    lam.real[:, part] += weight * self.states.real[:, part]
                    lam.imag[:, part] += weight * self.states.imag[:, part]
            else:
                lam += pauli_terms(m.obs, self.wires).apply(self.states, dy)
        grads = np.zeros_like(self.params)
        states = self.states.copy()  # the pass consumes ψ; jacobian() runs several
        kernels.adjoint(states, lam, self.program.ops, self.program.groups, self.params, self.program.matrices, grads)
        return self._per_parameter(grads)

    def _per_parameter(self, grads: np.ndarray) -> tuple[Any, ...]:
        refuse_trainable_coefficients(self.tape, NAME, sum(len(op.data) for op in self.tape.operations))
        values = self.tape.get_parameters(trainable_only=False)
        out = []
        for index in self.tape.trainable_params:
            per_row = grads[:, self.program.slot_param == index].sum(axis=1)
            out.append(per_row if qml.math.ndim(values[index]) else np.array(per_row.sum()))
        return PerParameter(out)

    def jacobian(self) -> Any:
        """d(results)/d(parameters) of an unbroadcast tape, one adjoint pass per result entry."""
        if self.broadcast:
            raise UnsupportedCircuitError(
                f"{NAME} differentiates broadcast circuits as vector-Jacobian products.",
                "differentiate through an ML interface (torch, autograd, jax) rather than asking for a Jacobian.",
            )
        single = self.results()
        shapes = [np.shape(r) for r in ((single,) if len(self.tape.measurements) == 1 else single)]
        rows = []
        for which, shape in enumerate(shapes):
            for k in range(int(np.prod(shape))):
                cot = [np.zeros(s) for s in shapes]
                cot[which].flat[k] = 1.0
                rows.append(self.vjp(cot[0] if len(shapes) == 1 else tuple(cot)))
        per_param = list(zip(*rows, strict=True)) if rows else []
        split = []
        start = 0
        for shape in shapes:
            size = int(np.prod(shape))
            columns = tuple(np.array(p[start : start + size]).reshape(shape) for p in per_param)
            split.append(columns[0] if len(columns) == 1 else columns)
            start += size
        return split[0] if len(split) == 1 else tuple(split)


class PerParameter(tuple):
    """VJPs, one per trainable parameter, of mixed shapes: (B,) for a broadcast input, () for a weight.

    PennyLane's torch interface tests a tape's VJPs with ``np.squeeze`` (which asks for ``squeeze``
    first), assuming one shape for all; this answers that test without stacking them.
    """

    def squeeze(self, axis: Any = None) -> np.ndarray:
        return np.zeros(len(self)).squeeze()


def initial_states(batch: int, nwires: int, dtype: Any = complex) -> np.ndarray:
    states = np.zeros((batch, 1 << nwires), dtype=dtype)
    states[:, 0] = 1.0
    return states
