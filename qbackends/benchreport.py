"""``qbackends bench report``: pytest-benchmark results as a backend × size table, with costs and a plot."""

from __future__ import annotations

import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeGuard

from .errors import StorageError, WorkloadInputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SIZE_KEYS = ("nodes", "wires", "nwires", "qubits")
UNITS = {"per_second": 1.0, "per_minute": 60.0, "per_hour": 3600.0}


@dataclass(frozen=True)
class Row:
    group: str
    backend: str
    size: int
    median: float
    ratio: float  # to the fastest backend at this size in this group
    cost: float | None  # price of one iteration, when a price is known
    bytes_per_second: float | None = None  # what the backend's kernels moved, when it counts them
    of_copy: float | None = None  # that, as a fraction of the machine's copy bandwidth in the same run
    chose: str | None = None  # for an ``auto`` row: the backend it took, and its ratio to the fastest backend


class Roofline(NamedTuple):
    """What a backend's kernels moved per second, and the machine's copy bandwidth in the same run (if measured)."""

    bytes_per_second: float
    copy_bytes_per_second: float | None


class KindMedians(NamedTuple):
    """One group's interleaved medians: backend -> seconds, and backend -> bytes its kernels moved."""

    group: str
    seconds: dict[str, Any]
    bytes_moved: dict[str, Any]


RESULTS_FIX = "pass the file written by pytest --benchmark-json=FILE."
PRICES_FIX = 'pass a TOML file of [prices."BACKEND"] tables.'


MAX_FILE_BYTES = 1 << 30  # a results file of every benchmark with its raw timings is a few MiB


def _read_text(path: str | Path, what: str, fix: str) -> str:
    from .userfiles import read_text

    return read_text(path, what, fix, MAX_FILE_BYTES)


def _positive(value: Any) -> TypeGuard[float]:
    """A positive, finite number (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """The benchmarks of a ``pytest --benchmark-json`` file, each checked (``check_benchmark``).

    Raises:
        WorkloadInputError: the file cannot be read, is not such a file, or an entry is malformed.
    """
    from .userfiles import read_json

    data = read_json(path, "Benchmark results file", RESULTS_FIX, MAX_FILE_BYTES)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise WorkloadInputError(f"{str(path)!r} is not a pytest-benchmark results file (no 'benchmarks' list).", RESULTS_FIX)
    for index, bench in enumerate(data["benchmarks"]):
        check_benchmark(bench, index, path)
    return data["benchmarks"]


def check_benchmark(bench: Any, index: int, path: str | Path) -> None:
    """Refuse an entry ``rows`` cannot read: not an object, a name or group that is no string, params or
    extra_info that are no objects, or a median (``stats``, or ``extra_info["medians"]``) that is not
    a positive, finite number of seconds. The error names the file, the entry's index and its name."""
    if not isinstance(bench, dict):
        raise WorkloadInputError(
            f"Benchmark results {str(path)!r}: entry {index} must be an object, not {_kind(bench)}.",
            "remove that entry, or pass the file written by pytest --benchmark-json=FILE.",
        )
    name = bench.get("name")
    where = f"Benchmark results {str(path)!r}: entry {index}" + (f" ({_shown(name)})" if isinstance(name, str) else "")
    fix = "rerun that benchmark with pytest --benchmark-json=FILE, or remove the entry."
    for key, kinds, wanted in (("name", str, "a string"), ("group", str, "a string"), ("params", dict, "an object")):
        if bench.get(key) is not None and not isinstance(bench[key], kinds):
            raise WorkloadInputError(f"{where}: {key} must be {wanted}, not {_kind(bench[key])}.", fix)
    stats = bench.get("stats")
    if not isinstance(stats, dict) or "median" not in stats:
        raise WorkloadInputError(f"{where} has no stats.median.", fix)
    if not _positive(stats["median"]):
        raise WorkloadInputError(
            f"{where} has median {_shown(stats['median'])}; a median must be a positive, finite number of seconds.", fix
        )
    extra = bench.get("extra_info") or {}
    if not isinstance(extra, dict):
        raise WorkloadInputError(f"{where}: extra_info must be an object, not {_kind(extra)}.", fix)
    for key in ("medians", "bytes_moved", "chosen"):
        if extra.get(key) is not None and not isinstance(extra[key], dict):
            raise WorkloadInputError(f"{where}: extra_info.{key} must be an object, not {_kind(extra[key])}.", fix)
    for label, seconds in _flat(extra.get("medians") or {}):
        if not _positive(seconds):
            raise WorkloadInputError(
                f"{where} has extra_info.medians[{label}] = {_shown(seconds)}; a median must be a positive, finite number of seconds.",
                fix,
            )


def _flat(nested: dict[str, Any]) -> list[tuple[str, Any]]:
    """(label, value) of a backend -> value mapping, or of a kind -> backend -> value one."""
    if nested and all(isinstance(v, dict) for v in nested.values()):
        return [(f"{kind!r}][{name!r}", v) for kind, inner in nested.items() for name, v in inner.items()]
    return [(repr(name), v) for name, v in nested.items()]


def _kind(value: Any) -> str:
    """``value`` as an error shows it: an object, a list, null, or the value itself, cut short."""
    kinds = {dict: "an object", list: "a list", type(None): "null"}
    return kinds.get(type(value)) or _shown(value)


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_prices(path: str | Path) -> dict[str, float]:
    """Prices in dollars per second, by backend, from TOML such as::

    [prices."local:pennylane/lightning.qubit"]
    per_minute = 0.00768

    Raises:
        WorkloadInputError: the file cannot be read, is not TOML, or a price is not one non-negative finite number.
    """
    text = _read_text(path, "Price file", PRICES_FIX)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadInputError(f"Price file {str(path)!r} is not TOML: {exc}.", PRICES_FIX) from exc
    except RecursionError as exc:
        raise WorkloadInputError(f"Price file {str(path)!r} is nested too deeply to be a price file.", PRICES_FIX) from exc
    table = data.get("prices", {})
    if not isinstance(table, dict):
        raise WorkloadInputError(f"Price file {str(path)!r}: prices must be a table, not {_kind(table)}.", PRICES_FIX)
    prices: dict[str, float] = {}
    for backend, entry in table.items():
        units = [u for u in UNITS if u in entry] if isinstance(entry, dict) else []
        value = entry[units[0]] if len(units) == 1 else None
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            found = ", ".join(f"{k} = {_shown(v)}" for k, v in entry.items()) if isinstance(entry, dict) else _kind(entry)
            raise WorkloadInputError(
                f"Price of {backend!r} in {str(path)!r} ({found or 'an empty table'}) must be exactly one of "
                f"{', '.join(UNITS)} with a non-negative, finite number.",
                f'write e.g. [prices."{backend}"] then per_minute = 0.00768.',
            )
        prices[backend] = float(value) / UNITS[units[0]]
    if not prices:
        raise WorkloadInputError(
            f'Price file {str(path)!r} has no [prices."BACKEND"] tables.',
            'write e.g. [prices."local:pennylane/lightning.qubit"] then per_minute = 0.00768.',
        )
    return prices


def _price_for(backend: str, prices: dict[str, float]) -> float | None:
    if backend in prices:
        return prices[backend]
    short = backend.rsplit("/", 1)[-1]
    return prices.get(short)


def _backend_of(params: dict[str, Any]) -> str | None:
    for key in ("backend", "device"):
        if isinstance(params.get(key), str):
            return params[key]
    return None


def _size_of(params: dict[str, Any]) -> int | None:
    for key in SIZE_KEYS:
        if isinstance(params.get(key), int) and not isinstance(params[key], bool):
            return params[key]
    return None


def rows(benchmarks: list[dict[str, Any]], prices: dict[str, float] | None = None) -> list[Row]:
    """One row per (group, backend, size) among benchmarks parametrised by a backend and a size, and
    per backend of a benchmark that timed several side by side (``extra_info["medians"]``: backend ->
    seconds, or kind -> backend -> seconds, a group per kind). With ``extra_info["bytes_moved"]``
    (the same shape) and ``extra_info["copy_bytes_per_second"]``, a row also says what fraction of
    the machine's copy bandwidth the backend reached. With ``extra_info["chosen"]`` (an auto row's
    name -> the backend it took), the auto row names that backend and its ratio to the fastest
    backend (auto rows aside): two rows of one device differ only by the machine's noise."""
    cells: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    roofline: dict[tuple[str, int, str], Roofline] = {}
    took: dict[tuple[str, int, str], str] = {}
    for bench in benchmarks:
        params = bench.get("params") or {}
        backend, size = _backend_of(params), _size_of(params)
        group = bench.get("group") or re.sub(r"\[.*\]$", "", bench.get("name") or "")
        extra = bench.get("extra_info") or {}
        medians = extra.get("medians")
        if isinstance(medians, dict) and size is not None:  # interleaved: one benchmark, many backends
            moved = extra.get("bytes_moved") or {}
            bandwidth = extra.get("copy_bytes_per_second")
            copy = float(bandwidth) if _positive(bandwidth) else None
            chosen = extra.get("chosen") or {}
            for part in _by_kind(group, medians, moved):
                took.update({(part.group, size, str(name)): str(b) for name, b in chosen.items() if name in part.seconds})
                for name, seconds in part.seconds.items():  # read_results checked that each is a positive number
                    cells[(part.group, size)][str(name)] = float(seconds)
                    nbytes = part.bytes_moved.get(name)
                    if _positive(nbytes):
                        roofline[(part.group, size, str(name))] = Roofline(nbytes / seconds, copy)
            continue
        if backend is None or size is None:
            continue
        other = {k: v for k, v in params.items() if k not in ("backend", "device", *SIZE_KEYS)}
        if other:
            group += " (" + ", ".join(f"{k}={v}" for k, v in sorted(other.items())) + ")"
        cells[(group, size)][backend] = float(bench["stats"]["median"])
    out = []
    for (group, size), medians in sorted(cells.items()):
        best = min(medians.values())
        for backend, median in sorted(medians.items(), key=lambda kv: kv[1]):
            price = _price_for(backend, prices or {})
            measured = roofline.get((group, size, backend))
            chose = took.get((group, size, backend))
            others = [m for b, m in medians.items() if (group, size, b) not in took]
            if chose is not None and chose in medians and others:  # against the fastest backend, auto rows aside
                chose = f"{chose}, x{medians[chose] / min(others):.2f} of the fastest backend"
            out.append(
                Row(
                    group=group,
                    backend=backend,
                    size=size,
                    median=median,
                    ratio=median / best,
                    cost=None if price is None else median * price,
                    bytes_per_second=measured.bytes_per_second if measured else None,
                    of_copy=_share(measured),
                    chose=chose,
                )
            )
    return out


def _share(measured: Roofline | None) -> float | None:
    """The fraction of the copy bandwidth a backend's kernels reached, when both were measured."""
    if measured is None or measured.copy_bytes_per_second is None:
        return None
    return measured.bytes_per_second / measured.copy_bytes_per_second


def _by_kind(group: str, medians: dict[str, Any], moved: dict[str, Any]) -> list[KindMedians]:
    """One group's medians, or one per kind when the medians (and bytes) are nested by kind."""
    if all(isinstance(v, dict) for v in medians.values()):
        return [KindMedians(f"{group}: {kind}", by_name, _object(moved.get(kind))) for kind, by_name in medians.items()]
    return [KindMedians(group, medians, moved)]


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def format_table(table: list[Row]) -> str:
    if not table:
        return "no benchmark here is parametrised by a backend and a size (nodes, wires, nwires, qubits)."
    lines = []
    for group in dict.fromkeys(r.group for r in table):
        members = [r for r in table if r.group == group]
        header = "| size | backend | median (s) | x fastest | $ per iteration |"
        rule = "|---:|---|---:|---:|---:|"
        measured = any(r.bytes_per_second is not None for r in members)
        if measured:  # the roofline: bytes the kernels moved per second, against copy bandwidth
            header += " GB/s moved | of copy bandwidth |"
            rule += "---:|---:|"
        lines += [f"## {group}", "", header, rule]
        for r in members:
            cost = f"{r.cost:.3g}" if r.cost is not None else "-"
            name = r.backend if r.chose is None else f"{r.backend} (took {r.chose})"
            line = f"| {r.size} | {name} | {r.median:.4g} | {r.ratio:.2f} | {cost} |"
            if measured:
                rate = f"{r.bytes_per_second / 1e9:.1f}" if r.bytes_per_second is not None else "-"
                share = f"{r.of_copy:.0%}" if r.of_copy is not None else "-"
                line += f" {rate} | {share} |"
            lines.append(line)
        lines.append("")
    return "\n".join(lines)


def plot(table: list[Row], path: str | Path) -> Path:
    """Time against size, log scale, one line per backend (per group).

    Raises:
        WorkloadInputError: matplotlib is missing, or ``path`` cannot be written (a folder, no permission).
    """
    from .plotting import figure, save_png

    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise WorkloadInputError(
            f"--plot {str(path)!r} needs matplotlib, which is not installed.",
            "pip install 'qbackends[plot]', or leave out --plot.",
        ) from exc
    fig, ax = figure(7, 4.5)
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    multi = len({r.group for r in table}) > 1
    for r in table:
        series[f"{r.backend} [{r.group}]" if multi else r.backend].append((r.size, r.median))
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("qubits")
    ax.set_ylabel("median seconds per iteration")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    try:
        return save_png(fig, path)
    except StorageError as exc:
        raise WorkloadInputError(
            f"The plot cannot be written to {str(path)!r}: {exc.reason}.",
            "pass --plot FILE.png naming a file (not a folder) in a writable place.",
        ) from exc
