"""``qbackends bench report``: pytest-benchmark results as a backend × size table, with costs and a plot."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import WorkloadInputError

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


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """The benchmarks of a ``pytest --benchmark-json`` file."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise WorkloadInputError(
            f"Benchmark results {str(path)!r} cannot be read: {exc.strerror or exc}.",
            "pass the file written by pytest --benchmark-json=FILE.",
        ) from exc
    except json.JSONDecodeError as exc:
        raise WorkloadInputError(
            f"Benchmark results {str(path)!r} are not JSON: {exc.msg} at line {exc.lineno}.",
            "pass the file written by pytest --benchmark-json=FILE.",
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise WorkloadInputError(
            f"{str(path)!r} is not a pytest-benchmark results file (no 'benchmarks' list).",
            "pass the file written by pytest --benchmark-json=FILE.",
        )
    return data["benchmarks"]


def read_prices(path: str | Path) -> dict[str, float]:
    """Prices in dollars per second, by backend, from TOML such as::

    [prices."local:pennylane/lightning.qubit"]
    per_minute = 0.00768
    """
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise WorkloadInputError(
            f"Price file {str(path)!r} cannot be read: {exc.strerror or exc}.", 'pass a TOML file of [prices."BACKEND"] tables.'
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadInputError(
            f"Price file {str(path)!r} is not TOML: {exc}.", 'pass a TOML file of [prices."BACKEND"] tables.'
        ) from exc
    prices: dict[str, float] = {}
    for backend, entry in data.get("prices", {}).items():
        units = [u for u in UNITS if u in entry] if isinstance(entry, dict) else []
        if len(units) != 1 or not isinstance(entry[units[0]], (int, float)) or entry[units[0]] < 0:
            raise WorkloadInputError(
                f"Price of {backend!r} in {str(path)!r} must be exactly one of {', '.join(UNITS)} with a non-negative number.",
                f'write e.g. [prices."{backend}"] then per_minute = 0.00768.',
            )
        prices[backend] = float(entry[units[0]]) / UNITS[units[0]]
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
        if isinstance(params.get(key), int):
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
    roofline: dict[tuple[str, int, str], tuple[float, float | None]] = {}
    took: dict[tuple[str, int, str], str] = {}
    for bench in benchmarks:
        params = bench.get("params") or {}
        backend, size = _backend_of(params), _size_of(params)
        group = bench.get("group") or re.sub(r"\[.*\]$", "", bench.get("name", ""))
        extra = bench.get("extra_info") or {}
        medians = extra.get("medians")
        if isinstance(medians, dict) and size is not None:  # interleaved: one benchmark, many backends
            moved = extra.get("bytes_moved") or {}
            copy = extra.get("copy_bytes_per_second")
            copy = float(copy) if isinstance(copy, (int, float)) and copy > 0 else None
            chosen = extra.get("chosen") or {}
            for kind, by_name, bytes_by_name in _by_kind(group, medians, moved):
                took.update({(kind, size, str(name)): str(b) for name, b in chosen.items() if name in by_name})
                for name, seconds in by_name.items():
                    if isinstance(seconds, (int, float)) and seconds > 0:
                        cells[(kind, size)][str(name)] = float(seconds)
                        nbytes = bytes_by_name.get(name)
                        if isinstance(nbytes, (int, float)) and nbytes > 0:
                            roofline[(kind, size, str(name))] = (nbytes / seconds, copy)
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
            rate, copy = roofline.get((group, size, backend), (None, None))
            chose = took.get((group, size, backend))
            if chose is not None and chose in medians:  # against the fastest backend, auto rows aside
                others = [m for b, m in medians.items() if (group, size, b) not in took]
                chose = f"{chose}, x{medians[chose] / min(others):.2f} of the fastest backend"
            out.append(
                Row(
                    group,
                    backend,
                    size,
                    median,
                    median / best,
                    None if price is None else median * price,
                    rate,
                    None if rate is None or copy is None else rate / copy,
                    chose,
                )
            )
    return out


def _by_kind(group: str, medians: dict[str, Any], moved: dict[str, Any]) -> list[tuple[str, dict, dict]]:
    """[(group, backend -> seconds, backend -> bytes)]: one entry, or one per kind when the medians
    (and bytes) are nested by kind."""
    if all(isinstance(v, dict) for v in medians.values()):
        return [(f"{group}: {kind}", by_name, moved.get(kind) or {}) for kind, by_name in medians.items()]
    return [(group, medians, moved)]


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
    """Time against size, log scale, one line per backend (per group)."""
    from .plotting import figure, save_png

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
    return save_png(fig, path)
