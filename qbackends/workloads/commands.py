"""CLI sub-commands ``run`` and ``job``. Heavy imports happen inside the handlers."""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import fields
from pathlib import Path
from typing import Any

log = logging.getLogger("qbackends")

DEVICE_HELP = "device string, e.g. local:pennylane/lightning.qubit (unset: AMZN_BRAKET_DEVICE_ARN, QBACKENDS_DEVICE, else auto)"


def register(sub: Any) -> None:
    """Add ``run``, ``sweep`` and ``job`` to the ``qbackends`` parser."""
    run = sub.add_parser("run", help="run a workload").add_subparsers(dest="workload", required=True, metavar="WORKLOAD")
    p = run.add_parser("qaoa", help="QAOA MaxCut on a random or given graph")
    p.add_argument("--device", default=None, help=DEVICE_HELP)
    p.add_argument("--nodes", type=int, default=18, help="nodes of the random graph (qubits)")
    p.add_argument("--edges", type=int, default=24, help="edges of the random graph")
    p.add_argument("--seed", type=int, default=1967, help="seed of the graph and the initial parameters")
    p.add_argument(
        "--graph", dest="graph_file", default=None, help="edge-list file, 'u v [weight]' per line, instead of a random graph"
    )
    p.add_argument("--layers", type=int, default=2, help="QAOA layers p")
    p.add_argument("--iterations", type=int, default=20, help="optimizer steps")
    p.add_argument("--stepsize", type=float, default=0.1, help="optimizer step size")
    p.add_argument("--optimizer", choices=("adam", "gd"), default="adam", help="Adam or plain gradient descent")
    p.add_argument("--diff-method", default="adjoint", help="PennyLane differentiation method")
    p.add_argument(
        "--precision", choices=("c128", "c64"), default="c128", help="amplitudes: c64 halves the memory (answers to about 1e-6)"
    )
    p.add_argument(
        "--formulation", choices=("fast", "qml.qaoa"), default="fast", help="IsingZZ+RX layers, or qml.qaoa's cost/mixer layers"
    )
    p.add_argument("--results-dir", default="results/qaoa", help="where results JSON and the plot go")
    p.add_argument("--checkpoint-dir", default=None, help="where checkpoints go (unset: RESULTS_DIR/checkpoints)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint of this same run")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG of the cost trace")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--mpi", action="store_true", help="split the state over the ranks of mpiexec -n R (R a power of two) on fused.qubit"
    )
    p.set_defaults(func=cmd_run_qaoa)

    p = run.add_parser("qnn", help="train the dressed QNN on Sonar (or --data CSV), on one or more workers")
    _qnn_options(p)
    p.add_argument("--nwires", type=int, default=6, help="qubits of the quantum layer")
    p.add_argument("--results-dir", default="results/qnn", help="where results JSON goes")
    p.add_argument("--checkpoint-dir", default=None, help="where checkpoints go (unset: RESULTS_DIR/checkpoints)")
    p.add_argument("--resume", action="store_true", help="continue from the last finished epoch")
    p.set_defaults(func=cmd_run_qnn)

    sweep = sub.add_parser("sweep", help="train one model per setting").add_subparsers(
        dest="workload", required=True, metavar="WORKLOAD"
    )
    p = sweep.add_parser("qnn", help="one dressed QNN per qubit count: accuracy and time against qubits")
    _qnn_options(p)
    p.add_argument("--nwires", default="3,4,6,8,10", help="comma-separated qubit counts")
    p.add_argument("--results-dir", default="results/qnn-sweep", help="where the table, JSON and plot go")
    p.set_defaults(func=cmd_sweep_qnn)

    job = sub.add_parser("job", help="run a hybrid-job script locally").add_subparsers(
        dest="job_command", required=True, metavar="ACTION"
    )
    p = job.add_parser(
        "run",
        help="run ENTRY_POINT with the Amazon Braket Hybrid Jobs environment",
        description="Run a script written for Amazon Braket Hybrid Jobs, unchanged, with the AMZN_BRAKET_* variables set. "
        "The device string is resolved first: AMZN_BRAKET_DEVICE_ARN gets local:<provider>/<PennyLane device name>.",
    )
    p.add_argument("entry_point", metavar="ENTRY_POINT", help="script.py, package.module or package.module:function")
    p.add_argument("--device", default="auto", help="device string; auto becomes the backend it picks here")
    p.add_argument("--hyperparameters", default=None, metavar="HP.json", help="JSON object of hyperparameters")
    p.add_argument("--input-data", action="append", default=[], metavar="CHANNEL=PATH", help="an input channel (repeatable)")
    p.add_argument("--checkpoint-dir", default=None, help="checkpoint folder (unset: JOBS_DIR/NAME/checkpoints)")
    p.add_argument("--results-dir", default=None, help="results folder (unset: JOBS_DIR/NAME/results)")
    p.add_argument("--job-name", default=None, help="job name (unset: qbackends-job-<date>-<time>)")
    p.add_argument("--jobs-dir", default="jobs", help="where job folders are made")
    p.set_defaults(func=cmd_job_run)


def _qnn_options(p: Any) -> None:
    p.add_argument("--device", default=None, help=DEVICE_HELP)
    p.add_argument("--ndata", type=int, default=208, help="rows of data used (Sonar has 208)")
    p.add_argument("--batch-size", type=int, default=16, help="global batch size")
    p.add_argument("--epochs", type=int, default=5, help="training epochs")
    p.add_argument("--lr", type=float, default=0.03, help="Adam learning rate, in (0, 1]")
    p.add_argument("--gamma", type=float, default=0.99, help="StepLR decay per epoch")
    p.add_argument("--margin", type=float, default=0.1, help="margin of the ranking loss")
    p.add_argument("--seed", type=int, default=1967, help="seed of the split, the sampler and the weights")
    p.add_argument("--test-fraction", type=float, default=0.25, help="held-out share of the data")
    p.add_argument("--patience", type=int, default=None, help="stop after K epochs without better held-out accuracy")
    p.add_argument("--workers", type=int, default=1, help="local processes (torch's elastic launcher)")
    p.add_argument("--scale-lr", action="store_true", help="keep the per-worker batch; scale the learning rate by the workers")
    p.add_argument("--diff-method", default="adjoint", help="PennyLane differentiation method")
    p.add_argument("--data", default=None, help="CSV, features then an M/R label per line (unset: the shipped Sonar data)")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines")


def _qnn_config(args: argparse.Namespace, nwires: int) -> Any:
    from ..workloads import qnn

    names = {f.name for f in fields(qnn.Config)}
    return qnn.Config(**{k: v for k, v in vars(args).items() if k in names and k != "nwires"}, nwires=nwires)


def int_list(text: str, option: str, example: str) -> list[int]:
    """``"12,16,20"`` -> [12, 16, 20], or a typed error naming the option."""
    from ..errors import WorkloadInputError

    try:
        values = [int(n) for n in text.split(",") if n.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise WorkloadInputError(
            f"{option} {text!r} is not a comma-separated list of positive integers.", f"pass e.g. {option} {example}."
        )
    return values


def _check_workers(workers: int) -> None:
    from ..errors import WorkloadInputError
    from ..launchers import current

    if workers < 1:
        raise WorkloadInputError(f"--workers {workers} must be at least 1.", "pass --workers 1 or more.")
    launch = current() if workers > 1 else None
    if launch is not None:
        raise WorkloadInputError(
            f"--workers {workers} under {launch.launcher}: {launch.launcher} already started the processes.",
            f"pass --workers 1 under {launch.launcher}.",
        )


def _checkpoint_dir(args: argparse.Namespace) -> str:
    return args.checkpoint_dir or str(Path(args.results_dir) / "checkpoints")


def _run_folders(results_dir: str, checkpoint_dir: str | None = None) -> Any:
    """This run's hold on its results and checkpoint folders (rank 0 only: the other ranks write nothing there)."""
    import contextlib

    from ..storage import exclusive_folders

    if not _is_rank_zero():
        return contextlib.nullcontext()
    folders = [(Path(results_dir), f"Results folder {results_dir!r}")]
    if checkpoint_dir is not None:
        folders.append((Path(checkpoint_dir), f"Checkpoint folder {checkpoint_dir!r}"))
    return exclusive_folders(folders)


def _quiet_unless_rank_zero() -> None:
    """Under mpiexec or srun every rank runs the command: rank 0 says what is decided, the others only their errors."""
    if not _is_rank_zero():
        log.setLevel(logging.ERROR)


def _is_rank_zero() -> bool:
    from ..launchers import current

    launch = current()  # torchrun's, mpiexec's or srun's
    return launch is None or launch.rank == 0


def cmd_run_qnn(args: argparse.Namespace) -> int:
    _check_workers(args.workers)
    _quiet_unless_rank_zero()
    config = _qnn_config(args, args.nwires)
    config.validate()  # before anything is made
    with _run_folders(args.results_dir, _checkpoint_dir(args)):
        return _run_qnn(args, config)


def _run_qnn(args: argparse.Namespace, config: Any) -> int:
    from ..workloads import qnn

    result = qnn.launch(config, args.device, args.workers, args.results_dir, _checkpoint_dir(args), args.resume, args.quiet)
    if not _is_rank_zero():
        return 0
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in result["phase_seconds"].items())
    print(
        f"{result['device']} x{result['workers']}: held-out accuracy {result['test_accuracy']:.3f} "
        f"(best {result['best_test_accuracy']:.3f}, majority class {result['majority_class_rate']:.3f}); {phases}"
    )
    print(f"results: {Path(args.results_dir) / qnn.RESULTS_FILE}")
    warning = qnn.one_class_warning(result)
    if warning:
        log.warning("qbackends: %s", warning)
    return 0


def cmd_sweep_qnn(args: argparse.Namespace) -> int:
    _quiet_unless_rank_zero()
    with _run_folders(args.results_dir):
        return _sweep_qnn(args)


def _sweep_qnn(args: argparse.Namespace) -> int:
    import time

    from ..storage import atomic_write, atomic_write_json
    from ..workloads import qnn

    _check_workers(args.workers)
    counts = int_list(str(args.nwires), "--nwires", "3,4,6,8,10")
    configs = [_qnn_config(args, n) for n in counts]
    for config in configs:
        config.validate()
    _check_sizes(args, configs)
    rows = []
    for config in configs:
        start = time.perf_counter()
        out = str(Path(args.results_dir) / f"nwires-{config.nwires}")
        result = qnn.launch(config, args.device, args.workers, out, None, False, args.quiet)
        rows.append(
            {
                "nwires": config.nwires,
                "test_accuracy": result["test_accuracy"],
                "best_test_accuracy": result["best_test_accuracy"],
                "seconds": time.perf_counter() - start,
                "quantum_seconds": result["phase_seconds"]["quantum"],
                "device": result["device"],
            }
        )
        print(f"nwires {config.nwires}: accuracy {result['test_accuracy']:.3f}, {rows[-1]['seconds']:.1f} s")
        warning = qnn.one_class_warning(result)
        if warning:
            log.warning("qbackends: at %d wires, %s", config.nwires, warning)
    results = Path(args.results_dir)
    atomic_write_json(results / "qnn-sweep.json", rows)
    table = ["| qubits | held-out accuracy | best | seconds | quantum seconds |", "|---|---|---|---|---|"]
    table += [
        f"| {r['nwires']} | {r['test_accuracy']:.3f} | {r['best_test_accuracy']:.3f} | {r['seconds']:.1f} | {r['quantum_seconds']:.1f} |"
        for r in rows
    ]
    text = "\n".join(table) + "\n"
    atomic_write(results / "qnn-sweep.md", lambda fh: fh.write(text.encode()))
    print(text, end="")
    try:
        print(f"plot: {_plot_sweep(rows, results / 'qnn-sweep.png')}")
    except ImportError:
        print("plot skipped: matplotlib is not installed (pip install 'qbackends[plot]')")
    return 0


def _check_sizes(args: argparse.Namespace, configs: list[Any]) -> None:
    """Every size of the sweep runs here, checked before the first trains: a refusal names the size."""
    from ..errors import QBackendsError
    from ..workloaddevices import check_qnn_size

    for config in configs:
        try:
            check_qnn_size(args.device, config.nwires, config.diff_method)
        except QBackendsError as exc:
            if type(exc).__init__ is not QBackendsError.__init__:  # a type with more fields than message and fix
                raise
            raise type(exc)(
                f"--nwires {args.nwires}, size {config.nwires}: {exc.message} Nothing was trained.",
                exc.fix,
            ) from exc


def _plot_sweep(rows: list[dict[str, Any]], path: Path) -> Path:
    from ..plotting import figure, save_png

    fig, ax = figure()
    qubits = [r["nwires"] for r in rows]
    ax.plot(qubits, [r["test_accuracy"] for r in rows], "o-", color="tab:blue", label="held-out accuracy")
    ax.set_xlabel("qubits")
    ax.set_ylabel("held-out accuracy", color="tab:blue")
    twin = ax.twinx()
    twin.plot(qubits, [r["seconds"] for r in rows], "s--", color="tab:red", label="training time")
    twin.set_ylabel("training time (s)", color="tab:red")
    ax.set_title("Dressed QNN on Sonar: accuracy and time against qubits")
    return save_png(fig, path)


def cmd_run_qaoa(args: argparse.Namespace) -> int:
    from ..workloads import qaoa

    names = {f.name for f in fields(qaoa.Config)}
    config = qaoa.Config(**{k: v for k, v in vars(args).items() if k in names})
    config.validate()  # before anything is made
    if args.mpi:
        _quiet_unless_rank_zero()
        _check_ranks(config)
    with _run_folders(args.results_dir, _checkpoint_dir(args)):
        return _run_qaoa(args, config)


def _check_ranks(config: Any) -> None:
    """``--mpi``: the ranks this launcher started can share the state (before MPI starts or anything is allocated)."""
    from ..fused.distributed import local_bits
    from ..launchers import current

    launch = current()
    if config.graph_file is None:  # a graph file's wires are checked when the device is built
        local_bits(config.nodes, launch.world if launch is not None else 1)


def _run_qaoa(args: argparse.Namespace, config: Any) -> int:
    from tqdm import tqdm

    from ..workloads import qaoa

    results_dir = Path(args.results_dir)
    checkpoint_dir = Path(_checkpoint_dir(args))
    bar = tqdm(total=config.iterations, desc="qaoa", unit="it", disable=args.quiet or not _is_rank_zero())

    def show(iteration: int, cost: float) -> None:
        bar.n = iteration
        bar.set_postfix(cost=f"{cost:.5f}")

    try:
        result = qaoa.run(config, args.device, checkpoint_dir=checkpoint_dir, resume=args.resume, on_iteration=show, mpi=args.mpi)
    finally:
        bar.close()
    if not _is_rank_zero():
        return 0
    from ..storage import atomic_write_json

    out = atomic_write_json(results_dir / "qaoa-results.json", result)
    print(
        f"{result['device']}: expected cut {result['expected_cut']:.4f} of max {result['max_cut']} "
        f"(ratio {result['approximation_ratio']:.3f}), most probable cut {result['most_probable_cut']:g}, "
        f"{result['seconds_per_iteration']:.3f} s/iteration"
        if result["approximation_ratio"] is not None
        else f"{result['device']}: expected cut {result['expected_cut']:.4f}"
    )
    print(f"results: {out}")
    if not args.no_plot:
        try:
            png = qaoa.plot_costs(
                result["costs"],
                results_dir / "qaoa-costs.png",
                f"QAOA MaxCut, {config.nodes} nodes, p={config.layers}, {result['device']}",
            )
            print(f"plot: {png}")
        except ImportError:
            print("plot skipped: matplotlib is not installed (pip install 'qbackends[plot]')")
    return 0


def cmd_job_run(args: argparse.Namespace) -> int:
    import sys

    from ..hybridjob import check_exit, lay_out, prepare_job, resolve_device, run_job, snapshot, written_since
    from ..storage import exclusive_folders

    device = resolve_device(args.device)  # before anything is made: a typo ends here
    plan = prepare_job(
        args.entry_point,
        job_name=args.job_name,
        hyperparameters=args.hyperparameters,
        input_data=args.input_data,
        jobs_dir=args.jobs_dir,
        checkpoint_dir=args.checkpoint_dir,
        results_dir=args.results_dir,
    )
    layout = plan.layout
    with exclusive_folders(layout.held()):  # a second run of this job waits for none: it is refused, naming this one
        lay_out(plan)
        before = snapshot(layout.results_dir)
        outcome = run_job(plan.command, layout, device, plan.name)
        produced = written_since(layout.results_dir, before)
    summary = {"job": plan.name, "device": device, "exit_code": outcome.code, "results_dir": str(layout.results_dir)}
    print(json.dumps({**summary, "results": produced}), flush=True)
    if outcome.leftover:
        print(
            f"qbackends: job {plan.name!r} left {outcome.leftover} process(es) running when it exited; they were ended with it.",
            file=sys.stderr,
        )
    check_exit(outcome, plan.name)
    return 0
