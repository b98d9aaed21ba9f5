"""The batched simulator's kernels: compiled C++ in ``qbackends_native`` (``native/src/batched.cpp``).

B states of n qubits, one per row of a (B, 2^n) array. A program is a table of operations, one row each:
(kind, target bit, control mask, parameter slot, matrix index, wire mask), bits counted from the least
significant (PennyLane's wire 0 is the most significant); parameters a (B, slots) table, so every row of
the batch has its own angles. The forward pass applies each group of single-qubit operations (``groups``:
rows [start, end)) in one sweep; the adjoint pass runs the groups backwards on ψ and λ = Oψ together,
adding each parameter's derivative to the (row, slot) of the gradient table.
"""

from __future__ import annotations

from qbackends_native import batched as _native

ROT_X, ROT_Y, ROT_Z, PHASE, MULTI_RZ, MATRIX, SWAP = range(7)
KIND, TARGET, CONTROLS, SLOT, MATRIX_INDEX, MASK = range(6)
PARALLEL_AMPLITUDES = _native.PARALLEL_AMPLITUDES  # below this many in the whole batch, one thread

forward = _native.forward  # forward(states, ops, groups, params, matrices): the program on every row, in place
adjoint = _native.adjoint  # adjoint(states, lams, ops, groups, params, matrices, grads): both consumed
apply_paulis = _native.apply_paulis  # out[b] = Σ_t coefs[b, t]·P_t states[b]
pauli_expvals = _native.pauli_expvals  # out[b, t] = <ψ_b|P_t|ψ_b>
