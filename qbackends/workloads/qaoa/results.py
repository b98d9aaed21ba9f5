"""QAOA's results record and the plot of its cost trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from .checkpoint import Progress
from .config import Config
from .graph import Graph, cut, cut_values

EXACT_MAX_CUT_NODES = 24  # the exact maximum cut is found over all 2^n bitstrings up to here


TIES = 1e-12  # probabilities this close (relative) are one: the order of summation alone tells them apart


def most_probable_index(probs: np.ndarray) -> tuple[int, float]:
    """(index, probability) of the most probable bitstring: the lowest index among those within ``TIES`` of the
    largest probability, so that runs that sum in another order (one process, MPI ranks) agree."""
    index = int(np.flatnonzero(probs >= probs.max() * (1 - TIES))[0])
    return index, float(probs[index])


def results(
    config: Config, graph: Graph, device_name: str, progress: Progress, *, final_energy: float, most_probable: tuple[int, float]
) -> dict[str, Any]:
    """The results record a run returns (and ``qbackends run qaoa`` writes as JSON); ``most_probable``: the most
    probable bitstring's index and probability."""
    best, probability = most_probable
    bits = format(best, f"0{graph.nodes}b")
    result: dict[str, Any] = {
        "config": asdict(config),
        "device": device_name,
        "graph": {"nodes": graph.nodes, "edges": [list(e) for e in graph.edges]},
        "costs": progress.costs,
        "final_energy": final_energy,
        "expected_cut": -final_energy,
        "params": progress.params,
        "most_probable_bitstring": bits,
        "most_probable_probability": float(probability),
        "most_probable_cut": cut(graph, bits),
        "seconds_per_iteration": float(np.median(progress.seconds)) if progress.seconds else None,
        "seconds": progress.seconds,
        "max_cut": None,
        "approximation_ratio": None,
    }
    if graph.nodes <= EXACT_MAX_CUT_NODES:
        best_cut = float(cut_values(graph).max())
        result["max_cut"] = best_cut
        result["approximation_ratio"] = -final_energy / best_cut if best_cut else None
    return result


def plot_costs(costs: Sequence[float], path: str | Path, title: str) -> Path:
    """A PNG of the cost trace."""
    from ...plotting import figure, save_png

    fig, ax = figure()
    ax.plot(range(1, len(costs) + 1), costs, marker="o", markersize=3)
    ax.set_xlabel("iteration")
    ax.set_ylabel("cost ⟨H_C⟩")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return save_png(fig, path)
