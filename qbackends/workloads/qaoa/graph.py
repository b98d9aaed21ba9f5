"""QAOA's problem: a weighted graph, random (``networkx.gnm_random_graph``) or read from an edge list, and its cuts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ...errors import WorkloadInputError

MAX_GRAPH_FILE_BYTES = 1 << 20
MAX_GRAPH_NODES = 40  # 2^40 amplitudes: no state-vector simulator here goes beyond
MAX_WEIGHT = 1e6  # keeps every cut, energy and gradient finite


class Edge(NamedTuple):
    """An edge ``u``-``v`` of weight ``weight`` (``u < v``)."""

    u: int
    v: int
    weight: float


@dataclass(frozen=True)
class Graph:
    """A weighted graph on nodes 0..n-1 (edges given as plain ``(u, v, weight)`` tuples become ``Edge``)."""

    nodes: int
    edges: tuple[Edge, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "edges", tuple(Edge(*e) for e in self.edges))

    @property
    def weighted(self) -> bool:
        return any(e.weight != 1.0 for e in self.edges)


def random_graph(nodes: int, edges: int, seed: int) -> Graph:
    """``networkx.gnm_random_graph(nodes, edges, seed)`` with unit weights."""
    import networkx as nx

    g = nx.gnm_random_graph(nodes, edges, seed=seed)
    return Graph(nodes, tuple(Edge(int(u), int(v), 1.0) for u, v in g.edges()))


def read_edge_list(path: str | Path) -> Graph:
    """Lines ``u v [weight]``; ``#`` starts a comment. Nodes are integers from 0."""
    from ...userfiles import read_text

    fix = "pass a text file of at most a few hundred edges, one per line: 'u v' or 'u v weight'."
    lines = read_text(path, "Graph file", fix, MAX_GRAPH_FILE_BYTES).splitlines()
    edges: dict[tuple[int, int], float] = {}
    for number, line in enumerate(lines, start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        try:
            if len(fields) not in (2, 3):
                raise ValueError(f"expected 'u v [weight]', got {len(fields)} fields")
            u, v = int(fields[0]), int(fields[1])
            weight = float(fields[2]) if len(fields) == 3 else 1.0
            if u < 0 or v < 0 or u == v or not math.isfinite(weight) or abs(weight) > MAX_WEIGHT:
                raise ValueError(f"nodes must be distinct non-negative integers and the weight finite, at most {MAX_WEIGHT:g}")
            if max(u, v) >= MAX_GRAPH_NODES:
                raise ValueError(f"node {max(u, v)} is beyond the {MAX_GRAPH_NODES} nodes (qubits) a state vector can hold here")
            if (min(u, v), max(u, v)) in edges:
                raise ValueError(f"edge {u}-{v} is given twice")
        except ValueError as exc:
            raise WorkloadInputError(
                f"Graph file {str(path)!r}, line {number}: {exc}: {line.strip()!r}.",
                "write each edge once, as 'u v' or 'u v weight'.",
            ) from None
        edges[(min(u, v), max(u, v))] = weight
    if not edges:
        raise WorkloadInputError(f"Graph file {str(path)!r} has no edges.", "write one edge per line as 'u v' or 'u v weight'.")
    nodes = 1 + max(max(e) for e in edges)
    return Graph(nodes, tuple(Edge(u, v, w) for (u, v), w in sorted(edges.items())))


def cut_values(graph: Graph) -> np.ndarray:
    """The cut value of every bitstring, vectorised over the 2^n basis (wire 0 is the top bit)."""
    index = np.arange(2**graph.nodes, dtype=np.uint32 if graph.nodes <= 32 else np.uint64)
    values = np.zeros(index.shape, dtype=np.float64)
    for u, v, w in graph.edges:
        shift_u, shift_v = graph.nodes - 1 - u, graph.nodes - 1 - v
        values += w * (((index >> shift_u) ^ (index >> shift_v)) & 1)
    return values


def cut(graph: Graph, bits: str) -> float:
    """The weight of the edges a bitstring (wire 0 first) cuts."""
    return float(sum(e.weight for e in graph.edges if bits[e.u] != bits[e.v]))
