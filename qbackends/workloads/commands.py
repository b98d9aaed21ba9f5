"""CLI sub-commands ``run`` and ``job``. Heavy imports happen inside the handlers."""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    """Add ``run`` and ``job`` to the ``qbackends`` parser."""
    run = sub.add_parser("run", help="run a workload").add_subparsers(dest="workload", required=True, metavar="WORKLOAD")
    p = run.add_parser("qaoa", help="QAOA MaxCut on a random or given graph")
    p.add_argument("--device", default=None, help="device string (default: AMZN_BRAKET_DEVICE_ARN, QBACKENDS_DEVICE, else auto)")
    p.add_argument("--nodes", type=int, default=18)
    p.add_argument("--edges", type=int, default=24)
    p.add_argument("--seed", type=int, default=1967)
    p.add_argument("--graph", dest="graph_file", default=None, help="edge-list file: 'u v [weight]' per line")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--stepsize", type=float, default=0.1)
    p.add_argument("--optimizer", choices=("adam", "gd"), default="adam")
    p.add_argument("--diff-method", default="adjoint")
    p.add_argument("--formulation", choices=("fast", "qml.qaoa"), default="fast")
    p.add_argument("--results-dir", default="results/qaoa")
    p.add_argument("--checkpoint-dir", default=None, help="default: RESULTS_DIR/checkpoints")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run_qaoa)

    job = sub.add_parser("job", help="run a hybrid-job script locally").add_subparsers(dest="job_command", required=True, metavar="ACTION")
    p = job.add_parser("run", help="run ENTRY_POINT with the Amazon Braket Hybrid Jobs environment")
    p.add_argument("entry_point", metavar="ENTRY_POINT", help="script.py, package.module or package.module:function")
    p.add_argument("--device", default="auto")
    p.add_argument("--hyperparameters", default=None, metavar="HP.json")
    p.add_argument("--input-data", action="append", default=[], metavar="CHANNEL=PATH")
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--results-dir", default=None)
    p.add_argument("--job-name", default=None)
    p.add_argument("--jobs-dir", default="jobs", help="where job folders are made")
    p.set_defaults(func=cmd_job_run)


def cmd_run_qaoa(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..workloads import qaoa

    names = {f.name for f in fields(qaoa.Config)}
    config = qaoa.Config(**{k: v for k, v in vars(args).items() if k in names})
    config.validate()
    results_dir = Path(args.results_dir)
    checkpoint_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else results_dir / "checkpoints"
    bar = tqdm(total=config.iterations, desc="qaoa", unit="it", disable=args.quiet)

    def show(iteration: int, cost: float) -> None:
        bar.n = iteration
        bar.set_postfix(cost=f"{cost:.5f}")

    try:
        result = qaoa.run(config, args.device, checkpoint_dir=checkpoint_dir, resume=args.resume, on_iteration=show)
    finally:
        bar.close()
    from ..storage import atomic_write_json

    out = atomic_write_json(results_dir / "qaoa-results.json", result)
    print(
        f"{result['device']}: expected cut {result['expected_cut']:.4f} of max {result['max_cut']} "
        f"(ratio {result['approximation_ratio']:.3f}), most probable cut {result['most_probable_cut']:g}, "
        f"{result['seconds_per_iteration']:.3f} s/iteration" if result["approximation_ratio"] is not None
        else f"{result['device']}: expected cut {result['expected_cut']:.4f}"
    )
    print(f"results: {out}")
    if not args.no_plot:
        try:
            png = qaoa.plot_costs(result["costs"], results_dir / "qaoa-costs.png", f"QAOA MaxCut, {config.nodes} nodes, p={config.layers}, {result['device']}")
            print(f"plot: {png}")
        except ImportError:
            print("plot skipped: matplotlib is not installed (pip install 'qbackends[plot]')")
    return 0


def cmd_job_run(args: argparse.Namespace) -> int:
    from ..hybridjob import prepare_job, run_job

    command, layout = prepare_job(
        args.entry_point,
        job_name=args.job_name,
        hyperparameters=args.hyperparameters,
        input_data=args.input_data,
        jobs_dir=args.jobs_dir,
        checkpoint_dir=args.checkpoint_dir,
        results_dir=args.results_dir,
    )
    code = run_job(command, layout, args.device, layout.root.name)
    produced = sorted(str(p) for p in layout.results_dir.rglob("*") if p.is_file())
    print(json.dumps({"job": layout.root.name, "exit_code": code, "results_dir": str(layout.results_dir), "results": produced}))
    return code
