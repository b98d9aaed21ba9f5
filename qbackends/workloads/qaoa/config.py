"""QAOA's settings: everything that determines a run's result, checked before anything runs."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import WorkloadInputError
from ...fixes import Spell, option
from .graph import MAX_GRAPH_NODES

OPTIMIZERS = ("adam", "gd")
PRECISIONS = ("c128", "c64")
FORMULATIONS = ("fast", "qml.qaoa")


@dataclass(frozen=True)
class Config:
    """Everything that determines a run's result (a checkpoint only resumes the same config)."""

    nodes: int = 18
    edges: int = 24
    seed: int = 1967
    layers: int = 2
    iterations: int = 20
    stepsize: float = 0.1
    optimizer: str = "adam"
    diff_method: str = "adjoint"
    formulation: str = "fast"
    graph_file: str | None = None
    init_scale: float = 0.01
    precision: str = "c128"  # c64: half the memory, answers to about 1e-6 (opted in, never by auto)

    def validate(self, spell: Spell = option) -> None:
        """Every setting's type and range, before anything runs; ``spell(name, value)`` words the fix (``option``
        for the CLI, ``hyperparameter`` for a job)."""
        from ...capabilities import DIFF_METHODS

        for name, low, high in (
            ("nodes", 2, MAX_GRAPH_NODES),
            ("edges", 1, None),
            ("seed", 0, 2**32 - 1),
            ("layers", 1, 1000),
            ("iterations", 1, 10**7),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise WorkloadInputError(f"{name}={value!r} is not a whole number.", spell(name, "a whole number") + ".")
            if name in ("nodes", "edges") and self.graph_file is not None:
                continue  # the graph file gives both
            if value < low or (high is not None and value > high):
                span = f"from {low} to {high}" if high is not None else f"at least {low}"
                fix = f"a whole number from {low} to {high}" if high is not None else f"{low} or more"
                raise WorkloadInputError(f"{name}={value} is out of range: it must be {span}.", spell(name, fix) + ".")
        for name, example in (("stepsize", "0.1"), ("init_scale", "0.01")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise WorkloadInputError(
                    f"{name}={value!r} is not a finite number of at least 0.",
                    spell(name, f"a number of at least 0, e.g. {example}") + ".",
                )
        if not self.stepsize > 0:
            raise WorkloadInputError(
                f"stepsize={self.stepsize} must be positive.", spell("stepsize", "a positive number, e.g. 0.1") + "."
            )
        if self.optimizer not in OPTIMIZERS:
            raise WorkloadInputError(
                f"optimizer {self.optimizer!r} is unknown; choices: {', '.join(OPTIMIZERS)}.",
                spell("optimizer", "adam or gd") + ".",
            )
        if self.formulation not in FORMULATIONS:
            raise WorkloadInputError(
                f"formulation {self.formulation!r} is unknown; choices: {', '.join(FORMULATIONS)}.",
                spell("formulation", "fast") + ".",
            )
        if self.precision not in PRECISIONS:
            raise WorkloadInputError(
                f"precision {self.precision!r} is unknown; choices: {', '.join(PRECISIONS)}.",
                spell("precision", "c64 (half the memory) or c128") + ".",
            )
        if self.diff_method not in DIFF_METHODS:
            raise WorkloadInputError(
                f"diff_method {self.diff_method!r} is unknown; choices: {', '.join(DIFF_METHODS)}.",
                spell("diff_method", "adjoint") + ".",
            )
        if self.graph_file is None and self.edges > self.nodes * (self.nodes - 1) // 2:
            most = self.nodes * (self.nodes - 1) // 2
            enough = next((n for n in range(self.nodes + 1, MAX_GRAPH_NODES + 1) if n * (n - 1) // 2 >= self.edges), None)
            more_nodes = f", or {spell('nodes', f'{enough} or more')}" if enough is not None else ""
            raise WorkloadInputError(
                f"edges={self.edges} does not fit a simple graph on {self.nodes} nodes (at most {most}).",
                f"{spell('edges', f'{most} or fewer')}{more_nodes}.",
            )
