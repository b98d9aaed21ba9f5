"""``qbackends.fused.qubit``: a PennyLane device that fuses diagonal gates and single-qubit layers.

Any QNode runs on it unchanged: PennyLane's preprocessing lowers other gates to the supported set,
rotates measurements to the Z basis, and expands parameter broadcasting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.devices import ExecutionConfig
from pennylane.measurements import CountsMP, ExpectationMP, ProbabilityMP, SampleMP, StateMP, VarianceMP

from .. import probe
from ..capabilities import describe_bytes
from ..errors import InsufficientMemoryError, UnsupportedCircuitError
from ..simbase.device import SimulatorDevice, state_dtype
from ..simbase.gradients import refuse_trainable_coefficients, trainable_observables
from ..simbase.measured import sampled_pauli_terms, variances_as_expectations
from ..simbase.measurements import by_pennylane, probabilities
from ..simbase.values import NUMBERS
from . import engine
from .program import SUPPORTED, Dense, DiagonalBlock, applied_by_matrix, compile_operations, evolution_terms, z_terms


def _diagonal_already(m: Any) -> bool:
    return m.obs is None or z_terms(m.obs) is not None


def _unrotatable(m: Any) -> bool:
    """A measurement of more than Z-basis outcomes (the state, a density matrix, an entropy, a shadow), or a sampled
    variance of non-commuting terms: the measurements are taken as they are, on the unrotated state."""
    if m.obs is None:
        return type(m) not in (ExpectationMP, VarianceMP, ProbabilityMP, SampleMP, CountsMP)
    return type(m) is VarianceMP and not _diagonal_already(m)


def _dense(obs: Any) -> bool:
    """Observables without a Pauli form (Hermitian, Projector, SparseHamiltonian): applied by their matrix."""
    return obs is not None and obs.pauli_rep is None


@qml.transform
def to_z_basis(tape: Any) -> tuple[Any, Any]:
    """Measure in the Z basis: sums of Z products stay one observable (one diagonal, one adjoint
    pass); other Pauli sums are split into commuting groups and rotated. A circuit that measures
    a matrix observable, or something a rotation would change (``_unrotatable``), keeps its observables:
    each is applied to the state (λ = Oψ)."""
    if all(_diagonal_already(m) for m in tape.measurements) or any(_dense(m.obs) or _unrotatable(m) for m in tape.measurements):
        return (tape,), lambda results: results[0]
    tapes, split = qml.transforms.split_non_commuting(tape)
    rotated, fns = [], []
    for t in tapes:
        (r,), fn = qml.transforms.diagonalize_measurements(t, supported_base_obs={qml.Z, qml.Identity})
        rotated.append(r)
        fns.append(fn)
    return rotated, lambda results: split([fn((res,)) for fn, res in zip(fns, results, strict=True)])


class CommutingRotations(qml.operation.Operation):
    """Π gate(2 h t) over commuting terms (gate, wires, h) on one parameter t: exactly the
    ApproxTimeEvolution it stands for. One parameter, so PennyLane binds and differentiates one
    number per layer; the device runs it as its gates; elsewhere it decomposes into them."""

    num_params = 1
    ndim_params = (0,)  # a scalar time; an array of times is a broadcast batch

    def __init__(self, t: Any, terms: Any, wires: Any = None, id: Any = None) -> None:
        terms = tuple((gate, tuple(w), float(h if isinstance(h, NUMBERS) else qml.math.unwrap(h))) for gate, w, h in terms)
        self._hyperparameters = {"terms": terms}
        super().__init__(t, wires=wires if wires is not None else list(dict.fromkeys(w for _, ws, _ in terms for w in ws)), id=id)

    @staticmethod
    def compute_decomposition(t: Any, wires: Any = None, terms: Any = ()) -> list[Any]:
        return [getattr(qml, gate)(2 * h * t, wires=list(w)) for gate, w, h in terms]


@qml.transform
def commuting_evolutions(tape: Any) -> tuple[Any, Any]:
    """Evolutions whose terms commute, in the form the kernels run (exact, one pass per kind):

    - ``ApproxTimeEvolution`` (``qml.qaoa.cost_layer``/``mixer_layer``) of Z words or of single-qubit
      terms on distinct wires: ``CommutingRotations`` on its time, Π MultiRZ(2 h t) · Π RX(2 h t)
      (``program.evolution_terms``). PennyLane then binds and differentiates one number per layer,
      not one per term. If a coefficient is trainable, the rotations themselves, so that the
      gradient reaches the coefficients through their angles.
    - ``Evolution`` of a sum of Z words: exp(-i t Σ h Z..Z) = Π MultiRZ(2 h t). PennyLane has no
      decomposition for the evolution of a multi-term Hamiltonian.

    Anything else is left to ``decompose``.
    """
    if not any(op.name in ("Evolution", "ApproxTimeEvolution") for op in tape.operations):
        return (tape,), lambda results: results[0]
    trainable = set(tape.trainable_params)
    ops, first = [], 0
    for op in tape.operations:
        data = op.data  # a Hamiltonian's: gathered from its terms each time it is read
        coefficients = range(first, first + len(data) - 1)  # all but the time
        first += len(data)
        rotations = None
        if op.name == "Evolution":
            rotations = _z_rotations(op)
        elif (terms := evolution_terms(op)) is not None:
            if trainable.intersection(coefficients):  # the gradient reaches them through the angles
                rotations = CommutingRotations.compute_decomposition(data[-1], terms=terms)
            else:
                rotations = [CommutingRotations(data[-1], terms)]
        ops.extend([op] if rotations is None else rotations)
    # the same measurements: copying them would copy each observable's terms
    return (tape.copy(operations=ops, measurements=tape.measurements),), lambda results: results[0]


def _z_rotations(op: Any) -> list[Any] | None:
    terms = z_terms(op.base)
    if terms is None:
        return None
    t = op.data[0]
    return [qml.MultiRZ(2 * h * t, wires=w) if w else qml.GlobalPhase(h * t, wires=op.wires) for w, h in terms]


LARGE_BUFFER_BYTES = 512 << 20
SIZED_BYTES = 64 << 20  # a circuit that may allocate this much is sized before it runs (FusedQubit.size_circuit)


class FusedQubit(SimulatorDevice):
    """State-vector simulator for circuits dominated by diagonal gates (QAOA, Ising evolutions).

    Args:
        wires: number of wires or their labels; None takes the wires of each circuit.
        shots: None for analytic results (adjoint gradients); a number samples the final state.
        seed: seed of the sampler's random numbers.
        c_dtype: ``numpy.complex128`` (default) or ``numpy.complex64``: half the memory and the bytes
            per pass; sums (expectations, gradients) are taken in float64 either way.
        mpi: split the state over the ranks of an MPI job (``mpiexec -n R``, R a power of two; see ``distributed``).
        ignore_memory: run a circuit even when it needs more memory than this machine (with ``mpi``, the ranks'
            node) has available (``get_device(..., ignore_memory=True)`` passes it on).
        share_node: with ``mpi`` and every rank on one node, the ranks share one state in shared memory and
            together make one process's passes over it (the default); False: each holds a share and they
            exchange, as ranks on several nodes do.
    """

    name = "qbackends.fused.qubit"
    config_filepath = Path(__file__).with_name("fused_qubit.toml")

    def __init__(
        self,
        wires: Any = None,
        shots: Any = None,
        seed: Any = None,
        c_dtype: Any = np.complex128,
        mpi: bool = False,
        ignore_memory: bool = False,
        share_node: bool = True,
    ) -> None:
        super().__init__(wires=wires, shots=shots)
        self._dtype = state_dtype(c_dtype, self.name)
        self._mpi = None
        if mpi:
            from .distributed import Ranks

            self._mpi = Ranks(self.wires, self._dtype, ignore_memory=ignore_memory, share_node=share_node)
        self._ignore_memory = ignore_memory
        self._rng = np.random.default_rng(seed)
        self._precision = "c64" if self._dtype == np.complex64 else "c128"
        self._diagonals = engine.DiagonalCache(real=np.float32 if self._dtype == np.complex64 else np.float64)
        self._scratch: dict[str, np.ndarray] = {}  # reused state buffers: no page faults per execution

    def _release_large_scratch(self) -> None:
        """Drop the gradient's buffers when each is 512 MiB or more (at 30 qubits c64, 8 GiB)."""
        for name in ("lambda", "phi"):
            if (buf := self._scratch.get(name)) is not None and buf.nbytes >= LARGE_BUFFER_BYTES:
                del self._scratch[name]

    def _buffer(self, name: str, size: int) -> np.ndarray:
        buf = self._scratch.get(name)
        if buf is None or buf.size != size:
            buf = self._scratch[name] = engine.state_buffer(size, self._dtype)
        return buf

    def _sizes(self, n: int, scratch: int = 0) -> bool:
        """Whether a circuit on ``n`` wires is sized before it runs: one whose states and tables (at most about eight
        states' worth) and ``scratch`` may come to SIZED_BYTES, unless ``ignore_memory``."""
        return not self._ignore_memory and (self._dtype.itemsize << n) * 8 + scratch >= SIZED_BYTES

    def size_circuit(
        self, n: int, states: list[str], scratch: int, tables: engine.CostTables, missing: int | None = None
    ) -> None:
        """Refuse a circuit on ``n`` wires before it allocates anything, when what it adds to what the device holds does
        not fit in the memory this machine has available: the ``states`` (buffers by name) it holds, ``scratch`` bytes
        it makes and drops (results, an observable applied), the ``tables`` of its cost (``missing``: bytes of them the
        cache lacks; None: as ``DiagonalCache.missing_bytes`` counts them). ``get_device``
        sized the device for the least a circuit needs (ψ, λ and a cost's levels); a circuit that needs more is sized
        here.

        Raises:
            InsufficientMemoryError: naming what the circuit holds, and the fixes.
        """
        state = self._dtype.itemsize << n
        new = [name for name in states if (buf := self._scratch.get(name)) is None or buf.size != 1 << n]
        missing = self._diagonals.missing_bytes(n, tables) if missing is None else missing
        more = state * len(new) + scratch + missing
        available = probe.host_memory_available()
        if more <= available:
            return
        what = _count(len(states), "state") + f" of {describe_bytes(state)}"
        if tables.levels or tables.diagonals:
            kinds = [_count(len(tables.levels), "table") + " of levels"] if tables.levels else []
            kinds += [_count(len(tables.diagonals), "diagonal") + " of weighted terms"] if tables.diagonals else []
            what += f", its cost's {' and '.join(kinds)}"
        if scratch:
            what += f", {describe_bytes(scratch)} of results and scratch"
        fixes = ["precision='c64' halves the state's memory"] if self._dtype == np.complex128 else []
        fixes += ["use fewer wires", "or pass ignore_memory=True (to get_device or the device) if you know better"]
        raise InsufficientMemoryError(
            f"fused.qubit cannot run this circuit of {n} wires: it holds {what}, {describe_bytes(more)} more than this "
            f"device holds now, and this machine has {describe_bytes(available)} available.",
            "; ".join(fixes) + ".",
        )

    # ---- preprocessing ----------------------------------------------------------------------

    def _add_engine_transforms(self, pipeline: Any) -> None:
        pipeline.add_transform(variances_as_expectations)
        pipeline.add_transform(sampled_pauli_terms)
        pipeline.add_transform(to_z_basis)
        pipeline.add_transform(commuting_evolutions)
        self._lower(pipeline, lambda op: op.name in SUPPORTED or isinstance(op, CommutingRotations) or applied_by_matrix(op))
        pipeline.add_transform(qml.transforms.broadcast_expand)

    def _gradient_options(self, circuit: Any) -> dict[str, Any]:
        # Values and gradients in one pass, unless an observable has trainable data: then values
        # alone, so that only a gradient actually asked for is refused (see _refuse_untracked_gradients).
        return {"grad_on_execution": circuit is None or not trainable_observables(circuit)}

    differentiated = "analytic expectations of observables and variances of Pauli observables"

    def _differentiates(self, circuit: Any) -> bool:
        """Expectations of observables (and, as two expectations, variances of Pauli observables), analytic."""
        return not circuit.shots and all(
            m.obs is not None and (type(m) is ExpectationMP or (type(m) is VarianceMP and m.obs.pauli_rep is not None))
            for m in circuit.measurements
        )

    # ---- execution --------------------------------------------------------------------------

    def execute(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        traffic = engine.Traffic(self._dtype.itemsize)
        self._release_large_scratch()  # values alone need ψ only: room for what they return (probabilities)
        results = tuple(self._simulate(tape, traffic)[0] for tape in circuits)
        self._track_batch(circuits, results, traffic)
        return results

    def execute_and_compute_derivatives(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        self._refuse_undifferentiated(circuits)
        traffic = engine.Traffic(self._dtype.itemsize)
        results, jacobians = (
            zip(*(self._simulate(tape, traffic, gradient=True) for tape in circuits), strict=True) if circuits else ((), ())
        )
        self._track_batch(circuits, results, traffic, derivatives=len(circuits))
        return tuple(results), tuple(jacobians)

    def _track_batch(self, circuits: Any, results: Any, traffic: engine.Traffic, derivatives: int = 0) -> None:
        """Each circuit with its result, then the batch with ``bytes_moved``: what the kernels read and wrote."""
        if not self.tracker.active:
            return
        for tape, result in zip(circuits, results, strict=True):
            self._track_tape(tape, results=result)
        self._track(
            batches=1,
            batch_len=len(circuits),
            bytes_moved=traffic.bytes,
            **({"derivative_batches": 1, "derivatives": derivatives} if derivatives else {}),
        )

    def compute_derivatives(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self.execute_and_compute_derivatives(circuits, execution_config)[1]

    def _simulate(self, tape: Any, traffic: engine.Traffic, gradient: bool = False) -> tuple[Any, Any]:
        wires = self.wires if self.wires is not None else tape.wires
        if self._mpi is not None:
            return self._mpi.simulate(tape, wires, gradient, traffic)
        n = len(wires)
        index = {w: i for i, w in enumerate(wires)}
        segments, nparams = compile_operations(tape.operations, index, n)
        if gradient:
            _refuse_untracked_gradients(tape, segments, nparams)
        adjoint = gradient and bool(tape.trainable_params)  # nothing trainable: empty Jacobians, no adjoint pass
        blocks = [seg for seg in segments if isinstance(seg, DiagonalBlock)]
        if not tape.shots and _one_diagonal_expectation(tape):  # a QAOA energy: see engine.expectation
            terms = z_terms(tape.measurements[0].obs)
            assert terms is not None
            masks, coefs = _masks_and_coefficients(terms, index, n)
            if self._sizes(n):
                tables = engine.cost_tables(blocks, masks, coefs)
                self.size_circuit(n, ["psi", "lambda"] if adjoint else ["psi"], 0, tables)
                self._diagonals.keep(max(len(tables.levels), len(tables.diagonals)))  # not built again every run
            value, grad, _ = engine.expectation(
                segments, nparams, n, masks, coefs, self._diagonals, self._buffer, traffic, adjoint
            )
            if not gradient:
                return np.array(value), None
            return np.array(value), _format_jacobian(np.array([grad[list(tape.trainable_params)] if grad is not None else []]))
        if not self._ignore_memory:
            self._size_measurements(tape, blocks, index, n, adjoint)
        psi = engine.forward(segments, n, self._buffer("psi", 1 << n), self._diagonals, traffic)
        if tape.shots:
            return self._sample(tape, psi, index, n), None
        values = []
        jac_rows = []
        for m in tape.measurements:
            if type(m) is StateMP:
                values.append(psi.copy())
            elif type(m) is ProbabilityMP and m.obs is None and m.mv is None:
                values.append(probabilities(psi, [index[w] for w in (m.wires or wires)], n))
            elif type(m) not in (ExpectationMP, VarianceMP) or m.obs is None:  # see by_pennylane
                values.append(by_pennylane(m, psi, wires, batched=False))
            elif (terms := z_terms(m.obs)) is None:  # matrix observables, and Pauli sums left unrotated
                o_psi = _apply_observable(m.obs, psi, index, wires)
                value = _inner(psi, o_psi).real
                if isinstance(m, VarianceMP):
                    values.append(np.array(_inner(o_psi, o_psi).real - value**2))
                    continue
                values.append(np.array(value))
                if gradient and not adjoint:
                    jac_rows.append(np.zeros(0))
                elif adjoint:
                    phi = psi.copy() if len(tape.measurements) > 1 else psi
                    jac_rows.append(
                        engine.adjoint_gradient(segments, nparams, phi, o_psi, n, self._diagonals, traffic)[
                            list(tape.trainable_params)
                        ]
                    )
            else:
                diagonal = self._diagonal(terms, index, n)
                if isinstance(m, VarianceMP):  # of a Pauli observable: preprocessing made it two expectations
                    values.append(by_pennylane(m, psi, wires, batched=False))
                elif adjoint:
                    lam = self._buffer("lambda", psi.size)
                    values.append(np.array(engine.K.expval_and_lambda(psi, diagonal, lam)))
                    traffic.add(psi.size, states=2, diagonals=1)  # ψ and the diagonal read, λ written
                    phi = psi
                    if len(tape.measurements) > 1:  # keep ψ for the next measurement
                        phi = self._buffer("phi", psi.size)
                        phi[:] = psi
                        traffic.add(psi.size, states=2)
                    grad = engine.adjoint_gradient(segments, nparams, phi, lam, n, self._diagonals, traffic)
                    jac_rows.append(grad[list(tape.trainable_params)])
                else:
                    values.append(np.array(engine.K.expval(psi, diagonal)))
                    traffic.add(psi.size, states=1, diagonals=1)  # ψ and the diagonal read
                    if gradient:  # nothing trainable: an empty Jacobian row
                        jac_rows.append(np.zeros(0))
        result = values[0] if len(values) == 1 else tuple(values)
        if not gradient:
            return result, None
        return result, _format_jacobian(np.array(jac_rows))

    def _size_measurements(self, tape: Any, blocks: list[DiagonalBlock], index: dict, n: int, adjoint: bool) -> None:
        """``size_circuit`` for a circuit measured otherwise than by one diagonal expectation: ψ; with the adjoint
        method λ, and φ beside it for more than one measurement; a diagonal per Z-basis observable the cache lacks
        (by its exact key: ``_diagonal``); and what each result makes and drops: a state returned, probabilities
        (over every amplitude first), samples (ψ at complex128 and its probabilities), a matrix observable applied
        to ψ (its matrix on its wires, and Oψ and its complex128 temporaries), a density matrix."""
        if (16 << (2 * n)) + (16 << n) * 12 < SIZED_BYTES:  # no result of so few wires comes near it
            return
        terms_of = [z_terms(m.obs) if m.obs is not None else None for m in tape.measurements]
        diagonal = [terms for terms in terms_of if terms is not None]
        states = (
            ["psi"] + (["lambda"] if adjoint and diagonal else []) + (["phi"] if adjoint and len(tape.measurements) > 1 else [])
        )
        state, wide = self._dtype.itemsize << n, 16 << n
        scratch = (wide + (8 << n)) if tape.shots else 0
        for m, terms in zip(tape.measurements, terms_of, strict=True):
            if type(m) is StateMP:
                scratch += 2 * state
            elif type(m) is ProbabilityMP:  # |ψ|² over every amplitude; summed and reordered unless it is the result
                wires = [index[w] for w in (m.wires or index)]
                scratch += (8 << n) + (0 if wires == list(range(n)) else 16 << len(wires))
            elif m.obs is not None and terms is None:  # Oψ, the matrix's temporaries, ψ's copy for the adjoint
                sparse = m.obs.has_sparse_matrix and not m.obs.has_matrix  # applied as it is (_apply_observable)
                scratch += (0 if sparse else 16 << (2 * len(m.obs.wires))) + state + 2 * wide + (state if adjoint else 0)
            elif m.obs is None and type(m) not in (ProbabilityMP, SampleMP, CountsMP):  # PennyLane's own (a density matrix)
                scratch += 4 * wide + (16 << (2 * len(m.wires or index)))
        if not self._sizes(n, scratch):
            return
        tables = engine.cost_tables(blocks, np.zeros(0, dtype=np.int64), np.zeros(0))
        missing = self._diagonals.missing_bytes(n, tables)
        for terms in diagonal:  # the observable's diagonal, looked up by its exact key (_diagonal)
            masks, coefs = _masks_and_coefficients(terms, index, n)
            if not self._diagonals.holds(n, masks, coefs):
                missing += np.dtype(self._diagonals.real).itemsize << n
                tables = tables._replace(diagonals=tables.diagonals | {(masks.tobytes(), coefs.tobytes())})
        self.size_circuit(n, states, scratch, tables, missing)

    def _sample(self, tape: Any, psi: np.ndarray, index: dict, n: int) -> Any:
        """Finite shots: PennyLane's own sampler on the final state (wires mapped to state axes)."""
        from pennylane.devices.qubit.sampling import measure_with_samples

        measurements = [m.map_wires(index) for m in tape.measurements]
        state = psi.astype(np.complex128, copy=False).reshape((2,) * n)  # probabilities summed in float64
        results = measure_with_samples(measurements, state, tape.shots, rng=self._rng)
        if len(measurements) == 1:
            return tuple(r[0] for r in results) if tape.shots.has_partitioned_shots else results[0]
        return tuple(results)

    def _diagonal(self, terms: list[tuple[list[Any], float]], index: dict, n: int) -> np.ndarray:
        return self._diagonals.get(n, *_masks_and_coefficients(terms, index, n))


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' if n != 1 else ''}"


def _masks_and_coefficients(terms: list[tuple[list[Any], float]], index: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A sum of Z products as bit masks of the state index and coefficients."""
    masks = np.array([sum(1 << (n - 1 - index[w]) for w in wires) for wires, _ in terms], dtype=np.int64)
    return masks, np.array([h for _, h in terms])


def _one_diagonal_expectation(tape: Any) -> bool:
    return (
        len(tape.measurements) == 1
        and type(tape.measurements[0]) is ExpectationMP
        and tape.measurements[0].obs is not None
        and z_terms(tape.measurements[0].obs) is not None
    )


def _refuse_untracked_gradients(tape: Any, segments: list, nparams: int) -> None:
    """Adjoint gradients flow through gate parameters only: refuse trainable observable coefficients
    and trainable operators run by their matrix, rather than return zeros for them."""
    refuse_trainable_coefficients(tape, FusedQubit.name, nparams)
    trainable = set(tape.trainable_params)
    for segment in segments:
        if isinstance(segment, Dense) and trainable & set(segment.params):
            raise UnsupportedCircuitError(
                "qbackends.fused.qubit runs operators without a decomposition by their matrix and cannot differentiate them.",
                "make their parameters constants, or use a lightning backend or diff_method='parameter-shift'.",
            )


def _apply_observable(obs: Any, psi: np.ndarray, index: dict, wires: Any) -> np.ndarray:
    """Oψ for any observable: by its sparse matrix over all wires, or its matrix on its own wires."""
    if obs.has_sparse_matrix and not obs.has_matrix:
        return np.asarray(obs.sparse_matrix(wire_order=wires) @ psi, dtype=psi.dtype)
    out = psi.copy()
    engine.apply_matrix(qml.matrix(obs), tuple(index[w] for w in obs.wires), out, len(wires))
    return out


def _inner(a: np.ndarray, b: np.ndarray) -> complex:
    """⟨a|b⟩ summed in complex128."""
    return complex(np.vdot(a.astype(np.complex128, copy=False), b.astype(np.complex128, copy=False)))


def _format_jacobian(jac: np.ndarray) -> Any:
    """PennyLane's shape for a device Jacobian: squeezed; a tuple per measurement and per parameter."""
    jac = np.squeeze(jac)
    if jac.ndim == 0:
        return np.array(jac)
    if jac.ndim == 1:
        return tuple(np.array(j) for j in jac)
    return tuple(tuple(np.array(j_) for j_ in j) for j in jac)
