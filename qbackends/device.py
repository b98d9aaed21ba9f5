"""``get_device``: a device string in, a ready PennyLane device out.

PennyLane is imported only when a device is built.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import numbers
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from . import capabilities, devicestring, probe
from .backend import Backend
from .devicestring import AUTO
from .errors import BackendUnavailableError, InsufficientMemoryError, QBackendsError, UnsupportedOptionError
from .registry import Registry, get_registry

log = logging.getLogger("qbackends")

DEVICE_ENV_VARS = ("AMZN_BRAKET_DEVICE_ARN", "QBACKENDS_DEVICE")
MAX_WIRES = 512  # far beyond any state vector; checked before any size arithmetic


def device_string_from_env(environ: Mapping[str, str] | None = None) -> str:
    """``AMZN_BRAKET_DEVICE_ARN``, then ``QBACKENDS_DEVICE``, then ``"auto"``."""
    environ = os.environ if environ is None else environ
    for name in DEVICE_ENV_VARS:
        if environ.get(name):
            return environ[name]
    return devicestring.AUTO


def facts_for(registry: Registry) -> probe.MachineFacts:
    """This machine's facts for the registered backends, with construction failures seen so far."""
    dists = tuple(b.distribution for b in registry.backends.values())
    facts = probe.machine_facts(dists)
    if registry.construction_errors:
        errors = {**facts.device_errors, **registry.construction_errors}
        facts = probe.MachineFacts(**{**facts.__dict__, "device_errors": errors})
    return facts


def wire_count(wires: Any) -> int | None:
    """The number of wires a request names: a positive integer (NumPy's too) or distinct labels, one or more.

    Raises:
        UnsupportedOptionError: for no wires, a negative, huge, fractional or string count, a None label, or repeated labels.
    """
    fix = "pass wires=n (a whole number from 1 to 512) or a list of distinct labels, e.g. wires=['a', 'b']."
    if wires is None:
        return None
    if isinstance(wires, bool) or isinstance(wires, (str, bytes)):
        raise UnsupportedOptionError(f"wires={wires!r} is not a number of wires or a list of labels.", fix)
    if isinstance(wires, numbers.Integral):
        count = int(wires)
        if not 1 <= count <= MAX_WIRES:
            raise UnsupportedOptionError(
                f"wires={count} is out of range (1 to {MAX_WIRES}): a device has at least one wire.", fix
            )
        return count
    if isinstance(wires, numbers.Number):
        raise UnsupportedOptionError(f"wires={wires!r} is not a whole number.", fix)
    if isinstance(wires, Iterator):  # read once, as labels: at most one past the cap
        wires = list(itertools.islice(wires, MAX_WIRES + 1))
    try:
        count = len(wires)
    except TypeError:
        raise UnsupportedOptionError(f"wires={wires!r} is not a number of wires or a list of labels.", fix) from None
    if count > MAX_WIRES:  # before anything that reads every label
        raise UnsupportedOptionError(f"wires names {count} labels; at most {MAX_WIRES}.", fix)
    if count == 0:
        raise UnsupportedOptionError(f"wires={wires!r} names no wires; a device has at least one.", fix)
    try:
        counts = Counter(wires)
    except TypeError:
        raise UnsupportedOptionError(f"wires={wires!r} holds a label that is not hashable.", fix) from None
    if None in counts:  # an operator given wires=None has none: qml.X(None) fails as a device rotates it
        raise UnsupportedOptionError(
            f"wires={wires!r} holds the label None, which PennyLane reads as no wire where an operator is built on it.",
            "label the wires with numbers or strings, e.g. wires=[0, 'a'].",
        )
    repeated = sorted(repr(w) for w, n in counts.items() if n > 1)
    if repeated:
        raise UnsupportedOptionError(f"wires={wires!r} repeats {', '.join(repeated)}; wire labels must be distinct.", fix)
    return count


MAX_SHOTS = 10**8  # a run's samples: 8 bytes a shot and wire; more is a typo, not a simulation


def check_shots(shots: Any) -> None:
    """``shots``: None (analytic), a positive whole number, or a shot vector of them or of (shots, copies) pairs,
    in all at most ``MAX_SHOTS``.

    Raises:
        UnsupportedOptionError: naming the value and what it takes.
    """
    if shots is None:
        return
    fix = f"pass shots=N (a whole number from 1 to {MAX_SHOTS}), a list of them, or leave shots out for analytic results."

    def count(entry: Any) -> int:
        if isinstance(entry, tuple) and len(entry) == 2:
            return count(entry[0]) * count(entry[1])
        if isinstance(entry, numbers.Integral) and not isinstance(entry, bool) and entry >= 1:
            return int(entry)
        raise UnsupportedOptionError(f"shots={shots!r:.80} is not a number of shots.", fix)

    entries = list(shots) if isinstance(shots, (list, tuple)) else [shots]
    if not entries:
        raise UnsupportedOptionError("shots=[] holds no shots.", fix)
    total = 0
    for entry in entries[: MAX_SHOTS + 1]:
        total += count(entry)
        if total > MAX_SHOTS:
            raise UnsupportedOptionError(f"shots={shots!r:.80} asks for more than {MAX_SHOTS} shots.", fix)


def check_request(
    precision: Any,
    diff_method: Any,
    ignore_memory: Any = False,
    fallback: Any = None,
    decompositions: Any = None,
    default_decompositions: Any = True,
    shots: Any = None,
) -> None:
    """The options of ``get_device``/``choose`` other than the string and the wires, checked once at the boundary.

    Raises:
        UnsupportedOptionError: naming the option, what it takes, and an example.
    """
    if not isinstance(precision, str) or precision not in capabilities.BYTES_PER_AMPLITUDE:
        raise UnsupportedOptionError(
            f"precision={precision!r} is not a precision qbackends knows; choices: c64, c128.",
            "pass precision='c64' (half the memory) or precision='c128' (default).",
        )
    if diff_method is not None and (not isinstance(diff_method, str) or diff_method not in capabilities.DIFF_METHODS):
        raise UnsupportedOptionError(
            f"diff_method={diff_method!r} is not a differentiation method; choices: {', '.join(capabilities.DIFF_METHODS)}, or None.",
            "pass e.g. diff_method='adjoint' (what the memory guard sizes for).",
        )
    for name, value in (("ignore_memory", ignore_memory), ("default_decompositions", default_decompositions)):
        if not isinstance(value, bool):
            raise UnsupportedOptionError(f"{name}={value!r} is not True or False.", f"pass {name}=True or {name}=False.")
    if fallback is not None and (isinstance(fallback, (str, bytes)) or not isinstance(fallback, Sequence)):
        raise UnsupportedOptionError(
            f"fallback={fallback!r} is not a list of device strings.",
            "pass a list, e.g. fallback=['local:pennylane/lightning.qubit'].",
        )
    if decompositions is not None and not isinstance(decompositions, Mapping):
        raise UnsupportedOptionError(
            f"decompositions={decompositions!r} is not a mapping of operator to rule.",
            "pass a dict, e.g. decompositions={'MultiRZ': qml.MultiRZ.compute_decomposition}.",
        )
    check_shots(shots)
    if decompositions:  # every key and rule, before any device (auto builds its candidates later)
        from .decompositions import user_rules

        user_rules(decompositions)


@dataclass(frozen=True)
class Choice:
    """A backend chosen for a request, with its capabilities record."""

    backend: Backend
    capabilities: capabilities.Capabilities


def requested_spec(spec: str | None) -> devicestring.DeviceSpec:
    """The parsed device string of a request: ``spec``, else the environment's (``device_string_from_env``).

    Raises:
        DeviceStringError, UnknownBackendError: for a bad string; one from the environment names its variable.
    """
    return _naming_source(spec, lambda: devicestring.parse(device_string_from_env() if spec is None else spec))


def _naming_source(spec: str | None, step: Callable[[], Any]) -> Any:
    """``step()``; an error it raises about a device string read from the environment names the variable."""
    try:
        return step()
    except QBackendsError as exc:
        source = next((name for name in DEVICE_ENV_VARS if os.environ.get(name)), None) if spec is None else None
        if source is None:
            raise
        raise type(exc)(f"{exc.message.rstrip('.')} (the device string came from {source}).", exc.fix) from exc


def candidates(
    spec: str | None, fallback: Sequence[str] | None, wires: int | None, registry: Registry, facts: probe.MachineFacts
) -> list[Backend]:
    """The backends to try, in order."""
    parsed = requested_spec(spec)
    if parsed.is_auto:
        from . import auto

        return auto.without_circuit(registry, facts, wires)
    chain = [_naming_source(spec, lambda: registry.lookup(parsed))]
    for name in fallback or ():
        named = devicestring.parse(name)
        if named.is_auto:
            raise UnsupportedOptionError(
                f"fallback={list(fallback or ())!r:.120} names auto, which is no one backend to fall back on.",
                f"name backends there, e.g. fallback=['local:pennylane/lightning.qubit'], or pass {AUTO!r} as the device string.",
            )
        backend = registry.lookup(named)
        if backend not in chain:
            chain.append(backend)
    return chain


def choose(
    spec: str | None = None,
    wires: int | None = None,
    *,
    fallback: Sequence[str] | None = None,
    precision: str = "c128",
    diff_method: str | None = "adjoint",
    ignore_memory: bool = False,
    registry: Registry | None = None,
    facts: probe.MachineFacts | None = None,
) -> Choice:
    """Pick the backend for a request without building anything.

    Raises:
        DeviceStringError, UnknownBackendError: for a bad or unknown string.
        BackendUnavailableError: when no candidate runs here (each one's reason is listed).
        InsufficientMemoryError: when the request fits on no candidate.
    """
    check_request(precision, diff_method, ignore_memory, fallback)
    wires = wire_count(wires)
    registry = registry or get_registry()
    facts = facts or facts_for(registry)
    chain = candidates(spec, fallback, wires, registry, facts)
    fit, refusals = screen(chain, wires, precision, diff_method, ignore_memory, facts)
    if refusals and fit and spec is not None and not devicestring.parse(spec).is_auto:
        log.warning(
            "qbackends: using %s instead of %s: %s", fit[0].backend.device_string, chain[0].device_string, refusals[0].message
        )
    return fit[0]


def screen(
    chain: Sequence[Backend],
    wires: int | None,
    precision: str,
    diff_method: str | None,
    ignore_memory: bool,
    facts: probe.MachineFacts,
    every: bool = False,
) -> tuple[list[Choice], list[QBackendsError]]:
    """The backends of ``chain`` that run here and fit the request (the first only, unless ``every``), and why
    the others do not.

    Raises:
        BackendUnavailableError, InsufficientMemoryError: when none of them does.
    """
    fit: list[Choice] = []
    refusals: list[QBackendsError] = []
    for backend in chain:
        caps = capabilities.evaluate(backend, facts, precision, diff_method)
        if not caps.ok:
            refusals.append(BackendUnavailableError(f"{backend.device_string} cannot run here: {caps.reason}.", caps.fix))
        elif wires is not None and caps.max_wires is not None and wires > caps.max_wires and not ignore_memory:
            refusals.append(memory_error(backend, caps, wires, precision, diff_method))
        else:
            fit.append(Choice(backend, caps))
            if not every:
                break
    if fit:
        return fit, refusals
    if len(refusals) == 1:
        raise refusals[0]
    kinds = {type(r) for r in refusals}
    error_type = kinds.pop() if len(kinds) == 1 else BackendUnavailableError
    raise error_type(
        "No backend can run this request: " + " | ".join(r.message for r in refusals),
        refusals[0].fix if len(refusals) == 1 else "see each backend's reason above; `qbackends list` shows what runs here.",
    )


def memory_error(
    backend: Backend, caps: capabilities.Capabilities, wires: int, precision: str, diff_method: str | None
) -> InsufficientMemoryError:
    need = capabilities.working_set_bytes(backend, wires, precision, diff_method)
    what = f"{wires} wires on {backend.device_string} at {precision} need {_gib(need)} "
    if backend.dense_adjoint_observables and diff_method == "adjoint":
        what += "(its adjoint method builds a dense 2^n x 2^n observable matrix) "
    else:
        during = f"{'an' if diff_method[:1] in 'aeiou' else 'a'} {diff_method} gradient" if diff_method else "a run"
        what += f"({backend.state_copies:g} state copies of {_gib(capabilities.state_bytes(wires, precision))} during {during}) "
    fixes = [f"use at most {caps.max_wires} wires"]
    if precision == "c128" and not backend.dense_adjoint_observables and _accepts_precision(backend):
        fixes.append("precision='c64' halves the memory")
    fixes.append("use a GPU backend with more memory (local:pennylane/lightning.gpu)")
    if backend.dense_adjoint_observables:
        fixes.append("use diff_method='backprop' or lightning.qubit")
    fixes.append("or pass ignore_memory=True if you know better")
    return InsufficientMemoryError(
        f"{what}but {caps.hardware} has {_gib(caps.memory_available)} available.", "; ".join(fixes) + "."
    )


def _accepts_precision(backend: Backend) -> bool:
    """Whether the device has a ``c_dtype`` option (asked only on this error path: it imports the device)."""
    try:
        return "c_dtype" in _accepted_options(backend.create or device_class(backend.device_name).__init__)[0]
    except QBackendsError:
        return False


def _gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB ({n} bytes)"


def device_class(device_name: str) -> Any:
    """The PennyLane device class registered under ``device_name`` (a ``pennylane.plugins`` entry point), looked up
    once per registry (reading every distribution's entry points took 90% of building a device)."""
    classes = get_registry().device_classes
    if device_name not in classes:
        found = next((ep for ep in metadata.entry_points(group="pennylane.plugins") if ep.name == device_name), None)
        if found is None:
            raise BackendUnavailableError(
                f"No PennyLane device named {device_name!r} is installed.", "install the package that provides it."
            )
        classes[device_name] = found.load()
    return classes[device_name]


def device_options(backend: Backend, factory: Callable[..., Any], precision: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``options`` against what the device accepts; map ``precision`` to its dtype.

    A plugin's ``create(wires, **options)`` passes options on to its PennyLane device: they are
    checked against that device class's own signature.
    """
    accepted, open_ended = _accepted_options(factory)
    if open_ended and backend.create is not None:
        try:
            accepted, open_ended = _accepted_options(device_class(backend.device_name).__init__)
        except BackendUnavailableError:  # create() is the whole factory: no PennyLane class to ask
            pass
    if open_ended and backend.options is not None:  # the plugin says what its **kwargs device takes
        accepted, open_ended = set(backend.options), False
    unknown = sorted(set(options) - accepted)
    if unknown and not open_ended:
        raise UnsupportedOptionError(
            f"{backend.device_string} does not accept the option(s) {', '.join(unknown)}; "
            f"it accepts: {', '.join(sorted(accepted)) or 'none'} (and precision).",
            f"remove {', '.join(unknown)}, or choose a backend that supports it.",
        )
    result = dict(options)
    if precision != "c128" or "c_dtype" in accepted:
        if "c_dtype" not in accepted:
            raise UnsupportedOptionError(
                f"{backend.device_string} has no precision option; precision={precision!r} cannot be honoured.",
                "drop precision, or use local:qbackends/fused.qubit or a lightning backend (c64 or c128).",
            )
        import numpy as np

        result.setdefault("c_dtype", np.complex64 if precision == "c64" else np.complex128)
    return result


GLOBAL_SEED_BOUND = 2**31 - 1  # what PennyLane-Lightning draws from NumPy's global generator when it is built


def seeded(factory: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every device takes one number from NumPy's global generator when it is built, as PennyLane's own do
    (``seed="global"``), so a program seeded with ``np.random.seed`` draws the same data whatever the backend;
    a device that does not draw it itself is seeded with it where it takes a ``seed``."""
    seed = inspect.signature(factory).parameters.get("seed")
    if "seed" in kwargs or (seed is not None and seed.default == "global"):
        return kwargs  # given, or the device draws it itself
    import numpy as np

    draw = int(np.random.randint(GLOBAL_SEED_BOUND))
    return {**kwargs, "seed": draw} if seed is not None else kwargs


def accepts_option(backend: Backend, name: str) -> bool:
    """Whether ``get_device`` passes the option ``name`` on to this backend's device."""
    try:
        accepted, open_ended = _accepted_options(backend.create or device_class(backend.device_name).__init__)
    except QBackendsError:
        return False
    return name in accepted or (open_ended and backend.options is not None and name in backend.options)


def _construct(backend: Backend, wires: Any, kwargs: Mapping[str, Any]) -> Any:
    import pennylane as qml

    if backend.create is not None:
        return backend.create(wires=wires, **kwargs)
    return qml.device(backend.device_name, wires=wires, **kwargs)


def _accepted_options(factory: Callable[..., Any]) -> tuple[set[str], bool]:
    """(named keyword options, whether it also takes ``**options``)."""
    params = inspect.signature(factory).parameters
    accepted = {n for n, p in params.items() if n not in ("self", "wires") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return accepted, any(p.kind is p.VAR_KEYWORD for p in params.values())


def build(choice: Choice, wires: Any, precision: str, options: Mapping[str, Any], registry: Registry | None = None) -> Any:
    """Construct the chosen device.

    A failure that the request caused (its wires or options) is the request's error; one that a
    plain one-wire construction repeats means the backend is broken here, and is recorded in the
    registry so that ``auto`` and ``fallback=`` pass over it.

    Raises:
        UnsupportedOptionError: the backend refused this request.
        BackendUnavailableError: the backend cannot be built here at all.
    """
    backend = choice.backend
    factory = backend.create or device_class(backend.device_name).__init__
    kwargs = seeded(factory, device_options(backend, factory, precision, options))
    try:
        return _construct(backend, wires, kwargs)
    except QBackendsError:
        raise
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        if _constructs_plainly(backend):
            raise UnsupportedOptionError(
                f"{backend.device_string} refused this request (wires={wires!r}"
                + "".join(f", {k}={v!r}" for k, v in options.items())
                + f"): {message}",
                "check the wires and options against the device's documentation; the backend itself works here.",
            ) from exc
        (registry or get_registry()).construction_errors[backend.device_name] = message
        raise BackendUnavailableError(
            f"{backend.device_string} failed at construction: {message}",
            capabilities.construction_fix(backend.hardware)
            + f", or pass fallback=[...] to get_device; `qbackends probe {backend.device_string}` shows the details.",
        ) from exc


def _constructs_plainly(backend: Backend) -> bool:
    """Whether the backend builds with one wire and no options: then a failure was the request's."""
    try:
        _construct(backend, 1, {})
    except Exception:  # noqa: BLE001 - any failure here means the backend is broken
        return False
    return True


def _check_request_on(backend: Backend, wires: Any, options: Mapping[str, Any]) -> None:
    """What a backend needs of the request beyond its options: shots for a sampler, an MPI build for mpi=True."""
    if backend.needs_shots and not options.get("shots"):
        raise UnsupportedOptionError(
            f"{backend.device_string} samples only: it gives no analytic results, and no shots were given.",
            f"pass shots=N, e.g. get_device({backend.device_string!r}, wires={wires!r}, shots=10000).",
        )
    if options.get("mpi") and backend.device_name in probe.MPI_OPS_MODULES:  # others refuse the option by name
        ok, reason = probe.mpi_support(backend.device_name)
        if not ok:
            raise UnsupportedOptionError(
                f"mpi=True cannot work on {backend.device_string}: {reason}.",
                "drop mpi=True, or build Lightning from source with MPI enabled and install mpi4py, then run under mpirun.",
            )


def rank_share_wires(count: int, launch: Any = None) -> int:
    """The wires whose whole state is as large as what this node's ranks of an MPI job hold of ``count`` wires
    (each rank 2^count / world amplitudes, ``local_world`` ranks on this node): what the memory guard sizes
    against this node's memory. ``launch``: ``launchers.current()`` unless given."""
    from .launchers import current

    launch = launch if launch is not None else current()
    world, local = (launch.world, launch.local_world) if launch is not None else (probe.mpi_world_size(), 1)
    return max(count - (world.bit_length() - 1) + (local - 1).bit_length(), 0)


def _capturing() -> bool:
    """Whether PennyLane's program capture is on (the per-circuit auto device runs tapes, not captured programs)."""
    import pennylane as qml

    return bool(qml.capture.enabled())


def get_device(
    spec: str | None = None,
    wires: int | Sequence[Any] | None = None,
    *,
    fallback: Sequence[str] | None = None,
    precision: str = "c128",
    decompositions: Mapping[Any, Callable[..., Any]] | None = None,
    default_decompositions: bool = True,
    diff_method: str | None = "adjoint",
    ignore_memory: bool = False,
    **options: Any,
) -> Any:
    """A PennyLane device for a device string.

    Args:
        spec: ``local:<provider>/<simulator>``, a bare simulator name, or ``"auto"``; None reads
            ``AMZN_BRAKET_DEVICE_ARN``, then ``QBACKENDS_DEVICE``, then uses ``"auto"``.
        wires: number of wires, or their labels.
        fallback: device strings to try, in order, when ``spec`` cannot run here.
        precision: ``"c128"`` (default) or ``"c64"``.
        decompositions: operator (class or name) -> decomposition rule or function; always used.
        default_decompositions: False turns the backend's default rules off.
        diff_method: the differentiation method planned, for the memory guard.
        ignore_memory: build even when the memory guard says the request does not fit.
        **options: device options (shots, seed, batch_obs, mpi, ...), checked against the device.

    Raises:
        QBackendsError: a typed subclass saying what is wrong and how to fix it.
    """
    check_request(precision, diff_method, ignore_memory, fallback, decompositions, default_decompositions, options.get("shots"))
    registry = get_registry()
    if isinstance(wires, Iterator):  # a generator of labels is read once, here
        wires = list(itertools.islice(wires, MAX_WIRES + 1))
    count = wire_count(wires)
    if isinstance(wires, numbers.Integral):
        wires = int(wires)  # NumPy integers work as they do in qml.device
    if requested_spec(spec).is_auto and not options.get("mpi") and not _capturing():
        from .autodevice import AutoQubit

        return AutoQubit(
            wires,
            precision=precision,
            decompositions=decompositions,
            default_decompositions=default_decompositions,
            diff_method=diff_method,
            ignore_memory=ignore_memory,
            **options,
        )
    guarded = count
    if options.get("mpi") and count is not None:  # each process holds 1/size of the state
        guarded = rank_share_wires(count)
    facts = facts_for(registry)
    chain = candidates(spec, fallback, count, registry, facts)
    fit, refusals = screen(chain, guarded, precision, diff_method, ignore_memory, facts, every=True)
    for choice in fit:  # a backend broken at construction is recorded and passed over; the next is tried
        _check_request_on(choice.backend, wires, options)
        try:
            device = build(choice, wires, precision, options, registry)
            break
        except BackendUnavailableError as exc:
            if choice.backend.device_name not in registry.construction_errors or choice is fit[-1]:
                raise
            refusals.append(exc)
    if choice.backend != chain[0] and not requested_spec(spec).is_auto:  # a fallback= took over: say so
        log.warning(
            "qbackends: using %s instead of %s: %s", choice.backend.device_string, chain[0].device_string, refusals[0].message
        )
    from . import decompositions as rules

    declared = choice.capabilities.operations
    if not declared.native:
        declared = capabilities.declared_by_device(device)
    ruleset = rules.build_ruleset(registry.rules(), choice.backend.key, declared, decompositions, default_decompositions)
    registry.warn_of_refused_rules(choice.backend)
    return rules.attach(device, ruleset)
