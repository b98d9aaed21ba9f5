"""Issue: auto per circuit. Every zoo circuit (``zoo.py``) on every backend that runs it here, and on
``get_device("auto", wires=n)``, timed interleaved, with auto's time over the fastest backend's.

One test per circuit, each as its own program (a demo is a script of its own): a new registry and context, so
auto's decisions and the trials' share of the work start afresh, and a decision store of its own, so an earlier
run's decisions are not reused. Each backend builds the circuit through ``get_device`` and runs its first step
untimed (caches fill then; a first call over ``FIRST_CALL_LIMIT_S`` drops the backend), the
results are checked against lightning.qubit's, and then every backend runs in turn round by round,
so all of them share the machine's noise. Backends that cannot run here are noted with the probe's
reason; one that refuses the circuit (a ``QBackendsError`` or a PennyLane error when it is built or
first called) is noted as "refused: <its message>"; one that fails otherwise (another library's bug)
as "failed: <the error>", with a warning. A failure on lightning.qubit, on auto or on a qbackends
simulator fails the test, as does a result that disagrees. Medians, notes and auto ÷ fastest go into
``extra_info`` (``qbackends bench report``: a group per circuit, params ``name`` and ``wires``) and
into the ratio tables at the end of the run.
"""

from __future__ import annotations

import math
import re
import time
import warnings

import numpy as np
import pennylane as qml
import pytest
import zoo
from conftest import auto_over_fastest, interleaved_medians, record_choice, record_note, record_ratio, record_seconds

from qbackends import QBackendsError, UnsupportedOptionError, capabilities, get_device, get_registry
from qbackends.device import facts_for
from qbackends.registry import reset_registry

REFERENCE = "local:pennylane/lightning.qubit"
FIRST_CALL_LIMIT_S = 30.0  # a first call (compilation included) longer than this drops the backend
BUDGET_S = 15.0  # timed seconds per circuit; slow-marked circuits get SLOW_BUDGET_S
SLOW_BUDGET_S = 120.0
MIN_SAMPLES = 5  # rounds at least
DROP_FACTOR = 3.0  # over budget, a backend this many times slower than the fastest is dropped
MAX_ROUNDS = 40
CLOSE_FACTOR = 2.0  # a backend whose warm step is within this of the fastest's is timed with auto to the end
FLOAT32_RTOL = 1e-5  # float32 results (torch's default dtype in the QNN's classical layers)
SEED = 1967  # device seed of circuits with shots, where the device takes one

PENNYLANE_ERRORS = tuple(
    c for c in vars(qml.exceptions).values() if isinstance(c, type) and issubclass(c, Exception) and not issubclass(c, Warning)
)
REFUSALS = (QBackendsError, *PENNYLANE_ERRORS)


def _candidates(notes: dict[str, str]) -> list[str]:
    """Device strings to try, lightning.qubit first and auto last; the others noted with their reason."""
    registry = get_registry()
    facts = facts_for(registry)
    found = []
    for backend in sorted(registry.backends.values(), key=lambda b: b.key):
        if backend.provider == "fixture":  # the test suite's deliberately broken plugins
            continue
        if backend.needs_shots:
            notes[backend.device_string] = "skipped: samples only (no analytic results)"
            continue
        caps = capabilities.evaluate(backend, facts)
        if not caps.ok:
            notes[backend.device_string] = f"skipped: {caps.reason}"
            continue
        found.append(backend.device_string)
    assert REFERENCE in found, notes.get(REFERENCE, f"{REFERENCE} is not registered")
    found.remove(REFERENCE)
    return [REFERENCE, *found, "auto"]


def _device(circuit: zoo.Circuit, device_string: str, notes: dict[str, str]):
    """The device, as a user gets it: ``get_device(string, wires=n)``, told the QNode's diff_method;
    seeded where the circuit samples and the device takes a seed."""
    kwargs = {"wires": circuit.wires, "diff_method": circuit.diff_method}
    if circuit.shots:
        try:
            return get_device(device_string, **kwargs, seed=SEED)
        except UnsupportedOptionError:
            notes[device_string] = "unseeded (no seed option)"
    return get_device(device_string, **kwargs)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, QBackendsError):
        return exc.one_line()
    text = re.sub(r" at 0x[0-9a-f]+", "", " ".join(f"{type(exc).__name__}: {exc}".split()))  # no object addresses
    return text if len(text) <= 300 else text[:299] + "…"


def _arrays(result: tuple) -> list[np.ndarray]:
    return [np.asarray(r.detach().numpy() if hasattr(r, "detach") else qml.math.unwrap(r)) for r in result]


def _disagreement(result: list[np.ndarray], reference: list[np.ndarray], atol: float) -> str | None:
    """Where ``result`` differs from ``reference``: float64 results by more than ``atol``, float32
    ones by more than their precision (or ``atol``, whichever is looser)."""
    if len(result) != len(reference):
        return f"{len(result)} results, lightning.qubit gives {len(reference)}"
    for i, (got, want) in enumerate(zip(result, reference, strict=True)):
        if got.shape != want.shape:
            return f"result {i}: shape {got.shape}, lightning.qubit's {want.shape}"
        tol = atol
        if np.float32 in (got.dtype, want.dtype):
            tol = max(atol, FLOAT32_RTOL * max(1.0, float(np.max(np.abs(want), initial=0.0))))
        error = float(np.max(np.abs(got.astype(complex) - want.astype(complex)), initial=0.0))
        if not error <= tol:
            return f"result {i}: max |difference| {error:.3g} from lightning.qubit's, over {tol:.0e}"
    return None


def _chosen(device) -> str:
    """The backend auto took: its ``last_choice`` after a step, else the backend that built it."""
    choice = getattr(device, "last_choice", None)
    if choice:
        return str(choice)
    return next(
        (b.device_string for b in get_registry().backends.values() if b.device_name == getattr(device, "name", None)),
        str(getattr(device, "name", device)),
    )


def _build(circuit: zoo.Circuit, notes: dict[str, str]):
    """(steps, warm seconds per step, auto's device): every backend's step after its untimed first
    call, checked against lightning.qubit's results."""
    steps, warm, devices, reference, wrong = {}, {}, {}, None, []
    for device_string in _candidates(notes):
        try:
            device = _device(circuit, device_string, notes)
            step = circuit.make(device)
            start = time.perf_counter()
            result = _arrays(step())
            first = time.perf_counter() - start
        except REFUSALS as exc:
            if device_string == REFERENCE:
                raise
            notes[device_string] = f"refused: {_one_line(exc)}"
            continue
        except Exception as exc:  # noqa: BLE001 - another library's failure: named, the other backends still run
            if device_string in (REFERENCE, "auto") or device_string.startswith("local:qbackends/"):
                raise
            notes[device_string] = f"failed: {_one_line(exc)}"
            warnings.warn(f"{circuit.name} on {device_string} failed: {_one_line(exc)}", stacklevel=1)
            continue
        if reference is None:
            reference = result
        elif (problem := _disagreement(result, reference, circuit.atol)) is not None:
            wrong.append(f"{device_string}: {problem}")
            continue
        if first > FIRST_CALL_LIMIT_S:
            notes[device_string] = f"dropped: first call took {first:.0f} s (over {FIRST_CALL_LIMIT_S:.0f} s)"
            continue
        start = time.perf_counter()
        step()
        warm[device_string] = time.perf_counter() - start
        steps[device_string], devices[device_string] = step, device
    if wrong:
        pytest.fail(f"{circuit.name}: results disagree with lightning.qubit's (atol {circuit.atol:g}): " + "; ".join(wrong))
    return steps, warm, devices.get("auto")


def _plan(
    circuit: zoo.Circuit, steps: dict, warm: dict[str, float], notes: dict[str, str]
) -> tuple[int, dict[str, int], tuple[int, list[str]]]:
    """(rounds of every backend, consecutive steps per round, (more rounds, of whom)): at least MIN_SAMPLES
    rounds of all. While the backends other than auto cannot have them within the circuit's budget (auto,
    the thing measured, comes on top), the slowest is dropped if it is over DROP_FACTOR times the fastest
    (it cannot be the fastest). The rest of the budget goes to auto and the backends within CLOSE_FACTOR
    of the fastest, up to MAX_ROUNDS in all: the comparison the zoo is for. A fast step runs a few times in
    a row per round, as a training loop runs it (its caches warm)."""
    budget = SLOW_BUDGET_S if circuit.slow else BUDGET_S
    consecutive = {name: 5 if s < 0.02 else 3 if s < 0.2 else 1 for name, s in warm.items()}

    def seconds(names):
        return sum(warm[name] * consecutive[name] for name in names)

    others = sorted((name for name in steps if name != "auto"), key=warm.__getitem__)
    while seconds(others) * MIN_SAMPLES > budget and len(others) > 1 and warm[others[-1]] > DROP_FACTOR * warm[others[0]]:
        slowest = others.pop()
        notes[slowest] = (
            f"dropped: {warm[slowest]:.2f} s a step, {warm[slowest] / warm[others[0]]:.0f}x the fastest; "
            f"{MIN_SAMPLES} rounds with it would pass the circuit's {budget:.0f} s"
        )
        del steps[slowest]
    close = [name for name in steps if name == "auto" or warm[name] <= CLOSE_FACTOR * warm[others[0]]]
    left = budget - MIN_SAMPLES * seconds(steps)
    more = max(0, min(MAX_ROUNDS - MIN_SAMPLES, math.floor(left / max(seconds(close), 1e-9))))
    return MIN_SAMPLES, {name: consecutive[name] for name in steps}, (more, close)


ZOO = [pytest.param(c.name, c.wires, id=c.name, marks=[pytest.mark.slow] if c.slow else []) for c in zoo.ZOO]


@pytest.fixture(autouse=True)
def own_program(monkeypatch, tmp_path):
    monkeypatch.setenv("QBACKENDS_DECISIONS", str(tmp_path / "decisions"))
    reset_registry()
    yield
    reset_registry()


@pytest.mark.parametrize(("name", "wires"), ZOO)
def test_auto_zoo(benchmark, name, wires):
    """One zoo circuit on every backend that runs it and on auto, interleaved; auto ÷ fastest."""
    circuit = zoo.BY_NAME[name]
    group = f"auto zoo: {name}"
    notes: dict[str, str] = {}
    steps, warm, auto_device = _build(circuit, notes)
    rounds, consecutive, then = _plan(circuit, steps, warm, notes)
    benchmark.group = group
    per_round: dict[str, dict[int, float]] = {}
    medians = interleaved_medians(benchmark, steps, rounds=rounds, consecutive=consecutive, per_round=per_round, then=then)
    chosen = _chosen(auto_device) if auto_device is not None else None
    ratio = auto_over_fastest(medians, per_round)
    if ratio is not None:
        record_ratio(group, *ratio)
    for device_string, median in medians.items():
        extra = f"{median * 1e3:9.2f} ms"
        if device_string == "auto":
            extra += f"  took {chosen}"
        record_seconds(group, device_string, median, extra)
    for device_string, note in notes.items():
        record_note(group, device_string, note)
    if chosen is not None:
        record_choice(group, chosen)
    benchmark.extra_info.update(
        medians=medians,
        chosen={"auto": chosen} if chosen is not None else {},
        auto_over_fastest=None if ratio is None else ratio[1],
        auto_over_fastest_of_medians=None if ratio is None else medians["auto"] / medians[ratio[0]],
        fastest=None if ratio is None else ratio[0],
        samples={n: len(per_round[n]) * consecutive[n] for n in medians},
        notes=notes,
        circuit={
            "source": circuit.source,
            "wires": circuit.wires,
            "batch": circuit.batch,
            "diff_method": circuit.diff_method,
            "shots": circuit.shots,
        },
    )
