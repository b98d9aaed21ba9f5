"""The ``qbackends`` command. Typed errors become one line on stderr, never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

from . import capabilities, devicestring
from .errors import EXIT_USAGE, PeerLostError, QBackendsError, UnsupportedOptionError, report
from .registry import get_registry
from .scoped import environment, log_lines_shown
from .screening import facts_for


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str], width: int | None = None) -> str:
    """Columns padded to their widest cell; with ``width``, the last column is cut to fit."""
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    if width is not None:
        room = width - sum(w + 2 for w in widths[:-1])
        if widths[-1] > room:
            widths[-1] = room
            for r in cells:
                r[-1] = r[-1] if len(r[-1]) <= room else r[-1][: room - 1] + "…"
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


LIST_WIDTH = 100


def cmd_list(args: argparse.Namespace) -> int:
    registry = get_registry()
    facts = facts_for(registry)
    records = [(b, capabilities.evaluate(b, facts, args.precision)) for b in registry.backends.values()]
    if args.json:
        print(
            json.dumps(
                [{"device": b.device_string, "plugin": registry.owners[b.key], **c.to_json()} for b, c in records], indent=2
            )
        )
        return 0
    rows = [
        (
            b.device_string,
            c.version or "no",
            c.max_wires if c.max_wires is not None and c.version else "-",
            "yes" if c.ok else "no",
            c.hardware if c.ok else c.reason,
        )
        for b, c in records
    ]
    print(_table(rows, ("backend", "installed", "max qubits", "runs here", "hardware, or why not"), width=LIST_WIDTH))
    if any(not c.ok for _, c in records):
        print("\nThe whole reason and its fix: qbackends probe BACKEND.")
    if registry.failures:
        print(f"\n{len(registry.failures)} plugin(s) failed to load; see `qbackends plugins`.")
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from .kinds import auto_role
    from .request import wire_count

    wire_count(args.wires)  # typed error for a negative or huge count, before any size arithmetic
    mpi = _mpi_info() if args.mpi else None  # no mpi4py: said first, in one line
    registry = get_registry()
    facts = facts_for(registry)
    spec = devicestring.parse(args.spec)
    if spec.is_auto:
        if mpi is not None:
            raise UnsupportedOptionError(
                "--mpi reports on one backend's ranks, and auto is not one backend.",
                "pass a device string, e.g. qbackends probe local:qbackends/fused.qubit --mpi.",
            )
        return _probe_auto(args, registry)
    if args.clear:
        raise UnsupportedOptionError(
            f"--clear removes auto's stored decisions, and {args.spec} is not auto.",
            "run qbackends probe auto --clear.",
        )
    backend = registry.lookup(spec)
    caps = capabilities.evaluate(backend, facts, args.precision, args.diff_method)
    need = capabilities.working_set_bytes(backend, args.wires, args.precision, args.diff_method) if args.wires else None
    fits = None if need is None or caps.max_wires is None or not caps.ok else args.wires <= caps.max_wires
    from .decompositions import build_ruleset

    rules = build_ruleset(registry.rules(), backend, caps.operations).names
    report = {
        **caps.to_json(),
        "device": backend.device_string,
        "wires": args.wires,
        "bytes_needed": need,
        "fits": fits,
        "rules": list(rules),
        "auto": auto_role(backend),
        **({"mpi": mpi.to_json()} if mpi is not None else {}),
    }
    code = 0 if caps.ok and fits is not False else 1
    if mpi is not None and _launch_rank() != 0:  # under mpiexec or srun, rank 0 says it for all
        return code
    if args.json:
        print(json.dumps(report, indent=2))
        return code
    ops = caps.operations
    if not ops.native and caps.ok:  # no TOML: ask a one-wire device what it declares in code
        from .context import get_context
        from .factory import construct
        from .screening import Choice

        try:
            ops = capabilities.declared_by_device(construct(Choice(backend, caps), 1, args.precision, {}, get_context()))
        except QBackendsError:
            pass
    rows = [
        ("device", backend.device_string),
        ("runs here", "yes" if caps.ok else f"no: {caps.reason}"),
        ("fix", caps.fix or "-"),
        ("installed", caps.version or "no"),
        ("hardware", caps.hardware),
        ("memory available", f"{caps.memory_available / 2**30:.1f} GiB"),
        ("max qubits", caps.max_wires if caps.max_wires is not None else "no state-vector limit"),
    ]
    if need is not None:
        rows.append((f"{args.wires} qubits need", f"{need / 2**30:.3g} GiB: {_verdict(fits, caps.ok)}"))
    rows += [
        ("native operations", f"{len(ops.native)} ({ops.source})"),
        ("adjoint cannot differentiate", ", ".join(sorted(set(ops.native) - set(ops.adjoint_differentiable))) or "-"),
        ("decomposition rules", "; ".join(rules) or "-"),
        ("auto takes it", auto_role(backend)),
    ]
    if mpi is not None:
        rows += [
            ("MPI library", f"{mpi.library} (MPI {mpi.standard}; {mpi.library_file or 'file unknown'})"),
            (
                "MPI ranks",
                f"{mpi.ranks} ({mpi.launcher}), {mpi.ranks_on_node} on this node" if mpi.launcher else "1 (one process)",
            ),
            ("memory per rank", f"{mpi.memory_per_rank / 2**30:.1f} GiB"),
        ]
    print(_table(rows, ("probe", args.spec)))
    return code


def _mpi_info() -> Any:
    from .launchers import current
    from .mpiinfo import mpi_info
    from .probe import host_memory_available

    return mpi_info(host_memory_available(), current())


def _launch_rank() -> int:
    from .launchers import current

    launch = current()
    return launch.rank if launch is not None else 0


def _probe_auto(args: argparse.Namespace, registry: Any) -> int:
    """How ``auto`` decides, the backends it weighs here with their measured costs, and its stored decisions
    (``--clear``: removed)."""
    from . import auto, decisionstore
    from .context import get_context
    from .screening import auto_candidates

    root = decisionstore.folder()
    if args.clear:
        removed = decisionstore.clear(root)
        print(
            f"removed {removed} stored decision{'s' if removed != 1 else ''} from {root}"
            if root
            else f"no decisions are stored ({decisionstore.DECISIONS_ENV}=off)"
        )
        return 0
    stored = decisionstore.entries(root)
    context = get_context()
    weighed = [c.backend for c in auto_candidates(context, args.wires, args.precision, args.diff_method)]
    model = auto.model(context)
    rows = []
    for backend in weighed:
        costs = model.get(backend.key)
        rows.append(
            {
                "device": backend.device_string,
                "execution_ms": round(costs.execution * 1e3, 3) if costs else None,
                "ns_per_gate_amplitude": round(costs.gate * 1e9, 3) if costs else None,
                "ns_per_diagonal_amplitude": round(costs.diagonal * 1e9, 3) if costs else None,
                "gradient_factor": round(costs.gradient, 2) if costs else None,
            }
        )
    decisions = [
        {
            "backend": d.backend,
            "circuit": d.describe,
            "measured_ms": round(d.measured[d.backend] * 1e3, 4) if d.backend in d.measured else None,
            "stored": d.stored,
            "file": str(path),
        }
        for path, d in stored
        if d is not None
    ]
    where = str(root) if root else f"nowhere ({decisionstore.DECISIONS_ENV}=off)"
    if args.json:
        print(
            json.dumps(
                {
                    "rules": auto.RULES,
                    "wires": args.wires,
                    "candidates": rows,
                    "stored_decisions": {"folder": where, "decisions": decisions},
                },
                indent=2,
            )
        )
        return 0
    print(auto.RULES)
    header = ("weighed here", "execution ms", "ns/gate/amp", "ns/diagonal/amp", "gradient x")
    print()
    print(_table([[r[k] if r[k] is not None else "not measured" for k in r] for r in rows], header))
    print()
    print(
        f"{len(decisions)} stored decision{'s' if len(decisions) != 1 else ''} in {where} "
        "(a second run of a script reuses them; qbackends probe auto --clear removes them)"
    )
    if decisions:
        print(
            _table(
                [
                    [d["backend"], d["circuit"], d["measured_ms"] if d["measured_ms"] is not None else "predicted", d["stored"]]
                    for d in decisions
                ],
                ("took", "for", "measured ms", "stored"),
            )
        )
    return 0


def _verdict(fits: bool | None, ok: bool) -> str:
    if not ok:
        return "(the backend cannot run here)"
    return "does NOT fit" if fits is False else "fits"


def cmd_plugins(args: argparse.Namespace) -> int:
    registry = get_registry()
    if args.verbose:  # also collect and check every plugin's rules (imports PennyLane; plain `plugins` does not)
        registry.rules()
    loaded = [
        (n, d, ", ".join(sorted(k for k, o in registry.owners.items() if o == n)) or "-") for n, d in registry.plugins.items()
    ]
    failed = {f.plugin for f in registry.failures}
    if args.json:
        print(
            json.dumps(
                {
                    "loaded": [{"plugin": n, "distribution": d, "backends": b} for n, d, b in loaded if n not in failed],
                    "failed": [f.__dict__ for f in registry.failures],
                },
                indent=2,
            )
        )
        return 0
    rows = [(n, d, ("partly loaded" if b != "-" else "failed") if n in failed else "loaded", b) for n, d, b in loaded]
    print(_table(rows, ("plugin", "distribution", "status", "backends")))
    for failure in registry.failures:
        print(f"\n{failure.plugin} ({failure.distribution}): {failure.error}")
        if args.verbose:
            print(failure.traceback)
    return 0


def cmd_bench_report(args: argparse.Namespace) -> int:
    from . import benchreport

    prices = benchreport.read_prices(args.prices) if args.prices else None
    table = benchreport.rows(benchreport.read_results(args.results), prices)
    print(benchreport.format_table(table))
    if args.plot and table:
        print(f"plot: {benchreport.plot(table, args.plot)}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from . import calibration, kinds
    from .errors import WorkloadInputError

    if args.repeats < 1:
        raise WorkloadInputError(
            f"--repeats {args.repeats} times nothing: the profile keeps the median of the timed repeats.",
            "pass --repeats 1 or more.",
        )
    if args.workload == "circuits":
        return _calibrate_circuits(args)
    kind = kinds.KINDS[args.workload]
    backends = kinds.calibration_candidates()
    if args.backends:
        registry = get_registry()
        backends = [registry.lookup(w) for w in {devicestring.parse(s) for s in args.backends.split(",")}]
    from .workloads.commands import int_list

    default_sizes = ",".join(map(str, kind.sizes))
    sizes = int_list(args.sizes or default_sizes, "--sizes", default_sizes)
    least = calibration.MIN_WIRES.get(args.workload, calibration.ANY_WIRES)
    if min(sizes) < least.wires:
        raise WorkloadInputError(
            f"--sizes {args.sizes}: {min(sizes)} is below the {least.wires} qubits the {args.workload} step needs: {least.why}.",
            f"pass sizes of {least.wires} or more, e.g. --sizes {default_sizes}.",
        )
    target = Path(args.output) if args.output else calibration.profile_path(args.workload)
    from .storage import exclusive

    with exclusive(target.with_name(target.name + ".lock"), f"Calibration profile {str(target)!r}"):
        profile = calibration.calibrate(
            backends,
            facts_for(get_registry()),
            kinds.calibration_step(args.workload),
            sizes,
            args.repeats,
            kind=args.workload,
            workload=kind.description,
            on_result=lambda b, n, s: print(f"{b:<32} {n:>3} qubits  {s:.4f} s"),
        )
        path = calibration.save_profile(profile, target)
    print(f"profile: {path}")
    return 0


def _calibrate_circuits(args: argparse.Namespace) -> int:
    """auto's cost model measured here: each CPU backend it weighs (or --backends) on the circuit classes."""
    from . import calibration, costmodel
    from .storage import exclusive

    registry = get_registry()
    if args.backends:
        backends = [registry.lookup(w) for w in {devicestring.parse(s) for s in args.backends.split(",")}]
    else:
        backends = costmodel.cpu_backends(registry)

    def show(backend: Any, costs: Any) -> None:
        print(
            f"{backend.device_string:<34} {costs.execution * 1e3:.3f} ms a call, {costs.gate * 1e9:.3f} ns a gate and amplitude"
        )

    target = Path(args.output) if args.output else calibration.profile_path("circuits")
    with exclusive(target.with_name(target.name + ".lock"), f"Cost model {str(target)!r}"):
        costs = costmodel.measure_all(backends, args.repeats, show)
        path = calibration.save_model(costs, facts_for(registry), target)
    print(f"cost model: {path}")
    return 0


def cmd_warmup(args: argparse.Namespace) -> int:
    """Kept for scripts that still call it: the kernels are compiled when qbackends-native is installed."""
    try:
        import qbackends_native
    except ImportError:
        print("nothing to warm up: fused.qubit and batched.qubit are not installed (pip install ./native builds their kernels)")
        return 0
    print(
        f"nothing to warm up: fused.qubit's and batched.qubit's kernels were compiled at install "
        f"(for {qbackends_native.ARCH}, {qbackends_native.VECTOR_ISA} vectors)"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .kinds import KINDS  # the kinds of circuit calibrate times (nothing heavy: kinds imports no PennyLane)

    parser = _Parser(prog="qbackends", description="Pick and use the right PennyLane simulator for this machine.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="backends, whether they run here, and how many qubits fit")
    p.add_argument("--precision", choices=("c64", "c128"), default="c128", help="amplitude precision for max qubits")
    p.add_argument("--json", action="store_true", help="everything, as JSON")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("probe", help="what one backend can do here, and the rules in force on it")
    p.add_argument("spec", metavar="SPEC", help="device string, e.g. local:pennylane/lightning.gpu")
    p.add_argument("--wires", type=int, default=None, help="qubits to check against the memory guard")
    p.add_argument("--precision", choices=("c64", "c128"), default="c128", help="amplitude precision")
    p.add_argument("--diff-method", default="adjoint", help="differentiation method planned, for the memory guard")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("--mpi", action="store_true", help="also the MPI library, the ranks and each rank's memory (qbackends[mpi])")
    p.add_argument("--clear", action="store_true", help="with SPEC auto: remove auto's stored decisions")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("plugins", help="loaded and failed plugins")
    p.add_argument("--json", action="store_true", help="loaded and failed plugins as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="also check every plugin's decomposition rules; show tracebacks")
    p.set_defaults(func=cmd_plugins)

    bench = sub.add_parser("bench", help="benchmark results").add_subparsers(
        dest="bench_command", required=True, metavar="ACTION"
    )
    p = bench.add_parser("report", help="table (and plot) of a pytest-benchmark JSON file")
    p.add_argument("results", metavar="RESULTS.json", help="written by pytest benchmarks --benchmark-json=RESULTS.json")
    p.add_argument("--prices", default=None, metavar="prices.toml", help='[prices."BACKEND"] per_minute/per_hour/per_second')
    p.add_argument("--plot", default=None, metavar="out.png", help="also draw the table as a PNG")
    p.set_defaults(func=cmd_bench_report)

    p = sub.add_parser(
        "calibrate",
        help="time the runnable backends here on a workload's step, into a profile that orders choose('auto', n)",
    )
    p.add_argument(
        "--workload",
        choices=[*sorted(KINDS), "circuits"],
        default="qaoa",
        help="what is timed: qaoa (a QAOA gradient; choose('auto', n) follows it), qnn (a batched QML step), or "
        "circuits (the circuit classes of auto's cost model, which auto then predicts with here)",
    )
    sizes = ", ".join(f"{','.join(map(str, kind.sizes))} for {name}" for name, kind in KINDS.items())
    p.add_argument("--sizes", default=None, help=f"comma-separated qubit counts (default: {sizes})")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats per size (the median is kept)")
    p.add_argument(
        "--backends", default=None, help="comma-separated device strings (default: every runnable backend auto may choose for it)"
    )
    p.add_argument(
        "--output",
        default=None,
        help="profile path (default: QBACKENDS_PROFILE, else ~/.cache/qbackends/profile.json; profile-qnn.json beside it for qnn)",
    )
    p.set_defaults(func=cmd_calibrate)

    text = "nothing to do: the simulators' kernels are compiled when they are installed (kept for older scripts)"
    p = sub.add_parser("warmup", help=text, description=text)
    p.add_argument("--precision", choices=("c128", "c64"), default="c128", help="ignored")
    p.set_defaults(func=cmd_warmup)

    for register in _extra_commands():
        register(sub)
    return parser


class _HelpFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default, where it has one worth saying."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, [], argparse.SUPPRESS) or "%(default)" in text or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """Every parser and sub-parser (argparse makes them of the root's class) shows defaults in --help, and refuses
    arguments in qbackends' one line (exit 2), pointing at that help instead of printing the usage block."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("qbackends").strip()
        text = " ".join(f"{where + ': ' if where else ''}{message}".split())
        self.exit(EXIT_USAGE, f"qbackends: error: {text}. Fix: `{self.prog} --help` lists what it takes.\n")


def _extra_commands() -> list[Callable[[Any], None]]:
    """Sub-commands whose modules are imported only when the parser is built."""
    from .workloads import commands as workload_commands

    return [workload_commands.register]


WRITING_COMMANDS = ("run", "sweep", "job", "calibrate", "bench")  # their default paths are relative to the working folder


def _check_working_folder() -> None:
    try:
        os.getcwd()
    except FileNotFoundError:
        raise QBackendsError(
            "The current folder no longer exists (it was removed after this shell entered it); "
            "relative paths such as results/ cannot be made in it.",
            "cd to an existing folder and run the command again.",
        ) from None


# OpenMP thread teams (torch's, lightning.kokkos', qbackends-native's) that spin while they wait starve every other
# thread as soon as the machine is busy: the QNN trained 11-25x slower beside one busy process. The command
# makes them sleep instead, before any of them starts; a value the user set is kept (benchmarks/test_bench_contention.py).
# They are set for as long as the command runs (the processes it starts inherit them), then removed again.
THREAD_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE", "KOKKOS_DISABLE_WARNINGS": "1"}


def main(argv: Sequence[str] | None = None) -> int:
    """The command; the environment and logging it sets up are as they were when it returns (or exits)."""
    with environment(THREAD_DEFAULTS):
        args = build_parser().parse_args(argv)
        if args.command in ("run", "sweep"):
            with log_lines_shown():
                return _command(args)
        return _command(args)


def _command(args: argparse.Namespace) -> int:
    try:
        if args.command in WRITING_COMMANDS:
            _check_working_folder()
        return int(args.func(args) or 0)
    except QBackendsError as exc:
        code = _ended(args, partial(report, exc))
        if isinstance(exc, PeerLostError):  # said: now at once (see PeerLostError)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return code
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("qbackends: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # never a traceback for users; QBACKENDS_DEBUG=1 shows it
        return _ended(args, partial(_internal_error, exc))


def _internal_error(exc: Exception) -> int:
    if os.environ.get("QBACKENDS_DEBUG"):
        traceback.print_exc()
    print(
        f"qbackends: internal error: {type(exc).__name__}: {' '.join(str(exc).split())} "
        "(set QBACKENDS_DEBUG=1 for the traceback)",
        file=sys.stderr,
    )
    return 1


def _ended(args: argparse.Namespace, say: Callable[[], int]) -> int:
    """The command's end after an error: ``say`` prints its one line and gives the exit code. Under ``--mpi``
    every rank runs the command: an error before MPI started is every rank's alike (rank 0 says it); after,
    the job is ended (``MPI_Abort``) so that no rank waits for ever on this one, rank 0 saying it when it
    fails too (the others wait a moment for that)."""
    if not getattr(args, "mpi", False):
        return say()
    from .fused.distributed import RANK_ZERO_GRACE, end_job, started

    if started():
        end_job(say)
    from .launchers import current

    launch = current()
    if launch is None or launch.rank == 0:
        return say()
    # The launcher ends the other ranks once one exits with an error: leave rank 0 time to say this error first.
    time.sleep(RANK_ZERO_GRACE)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
