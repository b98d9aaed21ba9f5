"""Measurements of state vectors, for one state (2^n,) or a table of them (B, 2^n), wire 0 the highest bit."""

from __future__ import annotations

from typing import Any

import numpy as np

CHUNK = 1 << 20  # amplitudes squared at a time: no temporary the size of the state


def magnitudes(states: np.ndarray) -> np.ndarray:
    """|ψ_k|² in float64 (a complex64 state's sums would lose digits), without a copy of the states
    (at 30 qubits c64 the state is 8 GiB and its probabilities 8 GiB more)."""
    out = np.empty(states.shape)
    flat, squares = states.reshape(-1), out.reshape(-1)
    for start in range(0, flat.size, CHUNK):
        part, into = flat[start : start + CHUNK], squares[start : start + CHUNK]
        np.square(part.real, out=into, dtype=np.float64)
        into += np.square(part.imag, dtype=np.float64)
    return out


def probabilities(states: np.ndarray, wires: list[int], n: int) -> np.ndarray:
    """The marginal distribution over ``wires`` (state axes, in their order) of each state."""
    batch = states.shape[:-1]
    lead = len(batch)
    p = magnitudes(states).reshape(batch + (2,) * n)
    others = tuple(lead + i for i in range(n) if i not in wires)
    marginal = p.sum(axis=others) if others else p
    order = sorted(wires)
    marginal = np.transpose(marginal, [*range(lead), *(lead + order.index(w) for w in wires)])
    return marginal.reshape(batch + (-1,))


def marginal_index(wires: list[int], n: int, start: int = 0, stop: int | None = None) -> np.ndarray:
    """For each basis state (those from ``start`` to ``stop``), its index in the marginal over ``wires`` (in their order)."""
    i = np.arange(start, 1 << n if stop is None else stop, dtype=np.int32 if n < 31 else np.int64)
    index = np.zeros_like(i)
    for w in wires:
        index = (index << 1) | ((i >> (n - 1 - w)) & 1)
    return index


def by_pennylane(m: Any, states: np.ndarray, wires: Any, batched: bool) -> Any:
    """``m`` of the final state(s) as default.qubit takes it (PennyLane's ``measure``): for what an engine has no
    path of its own for (a reduced density matrix, entropies, purity, probabilities of an observable, a matrix
    observable's variance, mid-circuit measurement values). ``states``: (2^n,), or (B, 2^n) when ``batched``."""
    from pennylane.devices.qubit import measure

    index = {w: i for i, w in enumerate(wires)}
    shape = states.shape[:-1] + (2,) * len(wires)
    return measure(m.map_wires(index), states.astype(np.complex128, copy=False).reshape(shape), is_state_batched=batched)
