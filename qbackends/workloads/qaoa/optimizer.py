"""QAOA's optimisers, with state that a JSON checkpoint can hold."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class OptimizerState:
    """Steps taken, and Adam's first and second moments (flat; empty before the first step)."""

    step: int = 0
    m: list[float] = field(default_factory=list)
    v: list[float] = field(default_factory=list)


def optimizer_step(name: str, params: np.ndarray, grad: np.ndarray, state: OptimizerState, stepsize: float) -> np.ndarray:
    """One Adam (β1=0.9, β2=0.99, ε=1e-8, PennyLane's defaults) or gradient-descent step."""
    if name == "gd":
        state.step += 1
        return params - stepsize * grad
    m = np.asarray(state.m or np.zeros(params.size)).reshape(params.shape)
    v = np.asarray(state.v or np.zeros(params.size)).reshape(params.shape)
    state.step += 1
    m = 0.9 * m + 0.1 * grad
    v = 0.99 * v + 0.01 * grad**2
    lr = stepsize * math.sqrt(1 - 0.99**state.step) / (1 - 0.9**state.step)
    state.m, state.v = m.ravel().tolist(), v.ravel().tolist()
    return params - lr * m / (np.sqrt(v) + 1e-8)
