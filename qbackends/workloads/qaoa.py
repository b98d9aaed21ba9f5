"""QAOA MaxCut, written once against ``get_device``.

The circuit is the Braket example's (``qml.qaoa`` cost and mixer layers) in its fastest exact form:
each cost term exp(-iγ w/2 Z_uZ_v) is ``IsingZZ(γ w)`` and each mixer term exp(-iα X) is ``RX(2α)``,
one pass over the state each. Energies equal the ``qml.qaoa`` circuit's (tests check 1e-9).

Run it from the CLI (``qbackends run qaoa``), or as a hybrid job (``python -m qbackends.workloads.qaoa``
under ``qbackends job run``): it reads ``AMZN_BRAKET_*`` when present.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..checkpoint import further_along
from ..errors import WorkloadInputError
from ..hybridjob import JobEnvironment, config_from_hyperparameters, save_job_result
from ..storage import atomic_write_json

CHECKPOINT_FILE = "qaoa-checkpoint.json"
OPTIMIZERS = ("adam", "gd")
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

    def validate(self) -> None:
        """Every setting's type and range, before anything runs (the CLI and the job entry point alike)."""
        from ..capabilities import DIFF_METHODS

        for name, low, high in (
            ("nodes", 2, MAX_GRAPH_NODES),
            ("edges", 1, None),
            ("seed", 0, 2**32 - 1),
            ("layers", 1, 1000),
            ("iterations", 1, 10**7),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise WorkloadInputError(f"{name}={value!r} is not a whole number.", f"pass --{name} as a whole number.")
            if name in ("nodes", "edges") and self.graph_file is not None:
                continue  # the graph file gives both
            if value < low or (high is not None and value > high):
                span = f"from {low} to {high}" if high is not None else f"at least {low}"
                raise WorkloadInputError(f"{name}={value} is out of range: it must be {span}.", f"pass --{name} {span}.")
        for name in ("stepsize", "init_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise WorkloadInputError(f"{name}={value!r} is not a finite number of at least 0.", "pass e.g. --stepsize 0.1.")
        if not self.stepsize > 0:
            raise WorkloadInputError(f"stepsize={self.stepsize} must be positive.", "pass e.g. --stepsize 0.1.")
        if self.optimizer not in OPTIMIZERS:
            raise WorkloadInputError(
                f"optimizer {self.optimizer!r} is unknown; choices: {', '.join(OPTIMIZERS)}.", "pass --optimizer adam or gd."
            )
        if self.formulation not in FORMULATIONS:
            raise WorkloadInputError(
                f"formulation {self.formulation!r} is unknown; choices: {', '.join(FORMULATIONS)}.", "pass --formulation fast."
            )
        if self.diff_method not in DIFF_METHODS:
            raise WorkloadInputError(
                f"diff_method {self.diff_method!r} is unknown; choices: {', '.join(DIFF_METHODS)}.", "pass --diff-method adjoint."
            )
        if self.graph_file is None and self.edges > self.nodes * (self.nodes - 1) // 2:
            raise WorkloadInputError(
                f"edges={self.edges} does not fit a simple graph on {self.nodes} nodes (at most {self.nodes * (self.nodes - 1) // 2}).",
                "pass fewer --edges or more --nodes.",
            )


# ---- the problem ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Graph:
    """A weighted graph on nodes 0..n-1."""

    nodes: int
    edges: tuple[tuple[int, int, float], ...]

    @property
    def weighted(self) -> bool:
        return any(w != 1.0 for _, _, w in self.edges)


def random_graph(nodes: int, edges: int, seed: int) -> Graph:
    """``networkx.gnm_random_graph(nodes, edges, seed)`` with unit weights."""
    import networkx as nx

    g = nx.gnm_random_graph(nodes, edges, seed=seed)
    return Graph(nodes, tuple((int(u), int(v), 1.0) for u, v in g.edges()))


MAX_GRAPH_FILE_BYTES = 1 << 20
MAX_GRAPH_NODES = 40  # 2^40 amplitudes: no state-vector simulator here goes beyond
MAX_WEIGHT = 1e6  # keeps every cut, energy and gradient finite


def read_edge_list(path: str | Path) -> Graph:
    """Lines ``u v [weight]``; ``#`` starts a comment. Nodes are integers from 0."""
    try:
        if Path(path).stat().st_size > MAX_GRAPH_FILE_BYTES:
            raise WorkloadInputError(
                f"Graph file {str(path)!r} is over {MAX_GRAPH_FILE_BYTES} bytes; a graph qbackends can simulate is far smaller.",
                "pass an edge list of at most a few hundred edges.",
            )
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise WorkloadInputError(
            f"Graph file {str(path)!r} cannot be read: {exc.strerror or exc}.", "pass an existing edge-list file."
        ) from exc
    except UnicodeDecodeError:
        raise WorkloadInputError(
            f"Graph file {str(path)!r} is not UTF-8 text.", "pass a text file with one edge per line: 'u v' or 'u v weight'."
        ) from None
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
    return Graph(nodes, tuple((u, v, w) for (u, v), w in sorted(edges.items())))


def cut_values(graph: Graph) -> np.ndarray:
    """The cut value of every bitstring, vectorised over the 2^n basis (wire 0 is the top bit)."""
    index = np.arange(2**graph.nodes, dtype=np.uint32 if graph.nodes <= 32 else np.uint64)
    values = np.zeros(index.shape, dtype=np.float64)
    for u, v, w in graph.edges:
        shift_u, shift_v = graph.nodes - 1 - u, graph.nodes - 1 - v
        values += w * (((index >> shift_u) ^ (index >> shift_v)) & 1)
    return values


def cost_hamiltonian(graph: Graph) -> Any:
    """H_C = Σ w/2 (Z_u Z_v - 1): its minimum is minus the maximum cut (``qml.qaoa.maxcut``'s, weighted)."""
    import pennylane as qml

    with qml.QueuingManager.stop_recording():  # safe to call inside a QNode
        coeffs, ops = [], []
        for u, v, w in graph.edges:
            coeffs += [0.5 * w, -0.5 * w]
            ops += [qml.PauliZ(u) @ qml.PauliZ(v), qml.Identity(u)]
        return qml.Hamiltonian(coeffs, ops).simplify()


def zz_hamiltonian(graph: Graph) -> Any:
    """Σ w/2 Z_u Z_v: H_C without its constant, which the fast formulation adds classically."""
    import pennylane as qml

    with qml.QueuingManager.stop_recording():
        return qml.Hamiltonian([0.5 * w for *_, w in graph.edges], [qml.PauliZ(u) @ qml.PauliZ(v) for u, v, _ in graph.edges])


def calibration_step(device_string: str, wires: int) -> Callable[[], Any]:
    """One p=2 value + adjoint gradient on gnm(n, 1.5n, seed=1967): what ``qbackends calibrate`` times for QAOA."""
    import pennylane as qml
    from autograd import value_and_grad

    from ..device import get_device

    graph = random_graph(wires, int(1.5 * wires), 1967)
    run = value_and_grad(energy_function(get_device(device_string, wires=wires), graph, 2))
    params = qml.numpy.array(np.full((2, 2), 0.3), requires_grad=True)
    return lambda: run(params)


def energy_function(device: Any, graph: Graph, layers: int, formulation: str = "fast", diff_method: str = "adjoint") -> Any:
    """⟨H_C⟩ as a differentiable function of params[2, layers] on ``device``.

    The fast formulation measures only the ZZ terms and adds H_C's constant -Σw/2 classically: one
    pass less over the state in the expectation and in the adjoint. ``energy.qnode`` is the QNode,
    ``energy.ansatz`` the circuit.
    """
    import pennylane as qml

    ansatz = circuit(graph, layers, formulation)
    if formulation == "fast":
        observable, offset = zz_hamiltonian(graph), -0.5 * sum(w for *_, w in graph.edges)
    else:
        observable, offset = cost_hamiltonian(graph), 0.0

    @qml.qnode(device, diff_method=diff_method)
    def expectation(params: Any) -> Any:
        ansatz(params)
        return qml.expval(observable)

    def energy(params: Any) -> Any:
        return expectation(params) + offset

    energy.qnode = expectation  # type: ignore[attr-defined]
    energy.ansatz = ansatz  # type: ignore[attr-defined]
    return energy


def circuit(graph: Graph, layers: int, formulation: str = "fast") -> Callable[[Any], None]:
    """The QAOA ansatz as a quantum function of params[2, layers] (γ row, α row)."""
    import pennylane as qml

    if formulation == "qml.qaoa":
        cost_h = cost_hamiltonian(graph)
        mixer_h = qml.qaoa.x_mixer(range(graph.nodes))

        def braket_example(params: Any) -> None:
            for wire in range(graph.nodes):
                qml.Hadamard(wire)
            for layer in range(layers):
                qml.qaoa.cost_layer(params[0][layer], cost_h)
                qml.qaoa.mixer_layer(params[1][layer], mixer_h)

        return braket_example

    def fast(params: Any) -> None:
        for wire in range(graph.nodes):
            qml.Hadamard(wire)
        for layer in range(layers):
            gamma, alpha = params[0][layer], params[1][layer]
            for u, v, w in graph.edges:
                qml.IsingZZ(gamma * w, wires=[u, v])
            for wire in range(graph.nodes):
                qml.RX(2 * alpha, wires=wire)

    return fast


# ---- optimisers with state that a JSON checkpoint can hold --------------------------------


@dataclass
class OptimizerState:
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


# ---- the run -------------------------------------------------------------------------------


@dataclass
class Progress:
    """What a checkpoint holds: the state after ``iteration`` finished iterations."""

    iteration: int
    params: list[list[float]]
    costs: list[float]
    seconds: list[float]
    optimizer: OptimizerState


def load_graph(config: Config) -> Graph:
    return read_edge_list(config.graph_file) if config.graph_file else random_graph(config.nodes, config.edges, config.seed)


def initial_params(config: Config) -> np.ndarray:
    return config.init_scale * np.random.default_rng(config.seed).uniform(size=(2, config.layers))


def run(
    config: Config,
    device: str | None = None,
    *,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    on_iteration: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Optimise the QAOA angles; return the results record.

    Args:
        config: the problem and optimiser settings.
        device: a device string for ``get_device`` (None: the environment, then ``auto``).
        checkpoint_dir: where a checkpoint is written after every iteration.
        resume: continue from the checkpoint there (it must be of the same config).
        on_iteration: called with (iteration, cost) after each iteration.
    """
    import pennylane as qml
    from pennylane import numpy as pnp

    config.validate()
    graph = load_graph(config)
    checkpoint = Path(checkpoint_dir) / CHECKPOINT_FILE if checkpoint_dir else None
    if resume and checkpoint is not None:
        device = _resumed_device(device, checkpoint)
    dev = workload_device(device, graph.nodes, config.diff_method, config.layers, config.iterations)
    energy = energy_function(dev, graph, config.layers, config.formulation, config.diff_method)
    value_and_grad = _value_and_grad(energy)
    start_params = pnp.array(initial_params(config), requires_grad=True)
    device_name = backend_name(dev, energy.qnode, start_params, config.diff_method)
    identity = run_identity(config, graph, device_name)
    progress = _load_checkpoint(checkpoint, config, identity) if resume and checkpoint else None
    if progress is None:
        progress = Progress(0, initial_params(config).tolist(), [], [], OptimizerState())
    params = np.array(progress.params)
    for iteration in range(progress.iteration + 1, config.iterations + 1):
        start = time.perf_counter()
        value, grad = value_and_grad(pnp.array(params, requires_grad=True))
        params = optimizer_step(config.optimizer, params, np.asarray(grad), progress.optimizer, config.stepsize)
        progress.seconds.append(time.perf_counter() - start)
        progress.costs.append(float(value))
        progress.params, progress.iteration = params.tolist(), iteration
        if checkpoint is not None:
            atomic_write_json(checkpoint, {"config": asdict(config), "run": identity, "progress": asdict(progress)})
        if on_iteration is not None:
            on_iteration(iteration, float(value))

    @qml.qnode(dev)
    def probabilities(params: Any) -> Any:
        energy.ansatz(params)
        return qml.probs(wires=range(graph.nodes))

    final_energy = float(energy(pnp.array(params, requires_grad=False)))
    if not (np.isfinite(final_energy) and np.isfinite(progress.costs).all() and np.isfinite(params).all()):
        raise WorkloadInputError(
            f"The optimisation diverged: energy {final_energy}, parameters {np.asarray(params).tolist()}.",
            "lower --stepsize, or use --optimizer adam.",
        )
    return _results(config, graph, device_name, progress, final_energy, np.asarray(probabilities(params)))


def workload_device(spec: str | None, wires: int, diff_method: str, layers: int = 2, iterations: int = 1000) -> Any:
    """The device this QAOA run uses: ``policy.qaoa_device``."""
    from ..policy import qaoa_device

    return qaoa_device(spec, wires, diff_method, layers, iterations)


def backend_name(dev: Any, qnode: Any, params: Any, diff_method: str) -> str:
    """The PennyLane name of the backend that runs ``qnode``: under ``auto``, the one it takes for this circuit
    (decided now, so that a checkpoint records it and a resumed run continues on it)."""
    import pennylane as qml

    from ..autodevice import AutoQubit

    if not isinstance(dev, AutoQubit):
        return str(dev.name)
    return str(dev.backend_for(qml.workflow.construct_tape(qnode)(params), diff_method).name)


def _value_and_grad(qnode: Any) -> Callable[[Any], tuple[Any, Any]]:
    """Value and gradient from one execution (adjoint computes both in one pass)."""
    from autograd import value_and_grad

    return value_and_grad(qnode)


def run_identity(config: Config, graph: Graph, device_name: str) -> dict[str, str]:
    """What makes a run this run: its settings (not the iteration budget), the graph itself (a file's
    contents, not its name) and the device. A checkpoint of another run is refused on resume."""
    import hashlib
    import json

    settings = {k: v for k, v in asdict(config).items() if k not in ("iterations", "graph_file")}
    edges = json.dumps([graph.nodes, [list(e) for e in graph.edges]])
    return {
        "settings": hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest(),
        "graph": hashlib.sha256(edges.encode()).hexdigest(),
        "device": device_name,
    }


_IDENTITY_WORDS = {
    "settings": "its settings differ ({})",
    "graph": "the graph differs (the edge list's contents changed)",
    "device": "it was made on another device ({})",
}


def _resumed_device(spec: str | None, checkpoint: Path) -> str | None:
    """Under ``auto``, a resumed run continues on the device its checkpoint was made on."""
    import json

    from ..device import device_string_from_env
    from ..devicestring import parse

    if not parse(spec if spec is not None else device_string_from_env()).is_auto or not checkpoint.exists():
        return spec
    try:
        recorded = json.loads(checkpoint.read_text())["run"]["device"]
    except (ValueError, KeyError, TypeError, OSError):
        return spec  # _load_checkpoint names what is wrong with it
    return recorded if isinstance(recorded, str) else spec


def _load_checkpoint(path: Path, config: Config, identity: dict[str, str]) -> Progress | None:
    import json

    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        recorded = data["run"]
        p = data["progress"]
        progress = Progress(p["iteration"], p["params"], p["costs"], p["seconds"], OptimizerState(**p["optimizer"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise WorkloadInputError(f"Checkpoint {str(path)!r} is unreadable: {exc}.", "remove it to start over.") from exc
    differences = [key for key in _IDENTITY_WORDS if recorded.get(key) != identity[key]]
    if differences:
        details = {
            "settings": ", ".join(
                f"{k}: {data.get('config', {}).get(k)!r} then, {v!r} now"
                for k, v in asdict(config).items()
                if k not in ("iterations", "graph_file") and data.get("config", {}).get(k) != v
            )
            or "see the checkpoint",
            "device": f"{recorded.get('device')!r} then, {identity['device']!r} now",
        }
        reasons = "; ".join(_IDENTITY_WORDS[k].format(details.get(k, "")) for k in differences)
        raise WorkloadInputError(
            f"Checkpoint {str(path)!r} is of another run: {reasons}.",
            "resume with the same options, graph and --device, or remove the checkpoint to start over.",
        )
    _check_progress(path, progress, config)
    return progress


def _check_progress(path: Path, progress: Progress, config: Config) -> None:
    """Every field of a checkpoint's progress: type, shape, range, finiteness."""

    def bad(what: str) -> WorkloadInputError:
        return WorkloadInputError(f"Checkpoint {str(path)!r} is corrupt: {what}.", "remove it to start over.")

    n = progress.iteration
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise bad(f"iteration {n!r} is not a whole number of at least 0")
    for name in ("costs", "seconds"):
        values = getattr(progress, name)
        if not isinstance(values, list) or len(values) != n:
            raise bad(f"{name} holds {len(values) if isinstance(values, list) else values!r} entries for {n} iterations")
    try:
        params = np.asarray(progress.params, dtype=float)
        numbers = np.asarray(progress.costs + progress.seconds, dtype=float)
        moments = np.asarray(progress.optimizer.m + progress.optimizer.v, dtype=float)
    except (TypeError, ValueError):
        raise bad("a value is not a number") from None
    if params.shape != (2, config.layers):
        raise bad(f"parameters of shape {params.shape}, not (2, {config.layers})")
    if not (np.isfinite(params).all() and np.isfinite(numbers).all() and np.isfinite(moments).all()):
        raise bad("a parameter, cost or optimizer moment is not finite")
    if n > config.iterations:  # a sound checkpoint, further along than asked
        raise further_along(path, n, config.iterations, "iterations", "--iterations")


def _results(
    config: Config, graph: Graph, device_name: str, progress: Progress, final_energy: float, probs: np.ndarray
) -> dict[str, Any]:
    best = int(np.argmax(probs))
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
        "most_probable_probability": float(probs[best]),
        "most_probable_cut": float(sum(w for u, v, w in graph.edges if bits[u] != bits[v])),
        "seconds_per_iteration": float(np.median(progress.seconds)) if progress.seconds else None,
        "seconds": progress.seconds,
        "max_cut": None,
        "approximation_ratio": None,
    }
    if graph.nodes <= 24:
        best_cut = float(cut_values(graph).max())
        result["max_cut"] = best_cut
        result["approximation_ratio"] = -final_energy / best_cut if best_cut else None
    return result


def plot_costs(costs: Sequence[float], path: str | Path, title: str) -> Path:
    """A PNG of the cost trace."""
    from ..plotting import figure, save_png

    fig, ax = figure()
    ax.plot(range(1, len(costs) + 1), costs, marker="o", markersize=3)
    ax.set_xlabel("iteration")
    ax.set_ylabel("cost ⟨H_C⟩")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return save_png(fig, path)


def main() -> int:
    """Entry point for a hybrid job: everything comes from ``AMZN_BRAKET_*``."""
    env = JobEnvironment.from_env()
    config = config_from_hyperparameters(Config, env.hyperparameters)
    result = run(config, env.device, checkpoint_dir=env.checkpoint_dir, resume=env.checkpoint_dir is not None)
    save_job_result(result, env)
    print(f"qaoa: expected cut {result['expected_cut']:.4f}, max cut {result['max_cut']}, on {result['device']}")
    return 0


if __name__ == "__main__":
    from ..hybridjob import entry

    raise SystemExit(entry(main))
