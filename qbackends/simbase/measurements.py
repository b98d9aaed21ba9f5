"""Measurements of state vectors, for one state (2^n,) or a table of them (B, 2^n), wire 0 the highest bit."""

from __future__ import annotations

import numpy as np


def magnitudes(states: np.ndarray) -> np.ndarray:
    """|ψ_k|² in float64 (a complex64 state's sums would lose digits)."""
    return np.abs(states.astype(np.complex128, copy=False)) ** 2


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


def marginal_index(wires: list[int], n: int) -> np.ndarray:
    """For each basis state, its index in the marginal over ``wires`` (in their order)."""
    i = np.arange(1 << n)
    index = np.zeros_like(i)
    for w in wires:
        index = (index << 1) | ((i >> (n - 1 - w)) & 1)
    return index
