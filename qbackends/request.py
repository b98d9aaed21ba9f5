"""A device request, parsed once: ``parse_request`` checks what ``get_device`` (or the auto device) is given and
returns a ``Request``, the one value every later step reads (screening, the factory, the auto device).

Nothing here imports PennyLane.
"""

from __future__ import annotations

import itertools
import numbers
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import capabilities, devicestring
from .devicestring import DeviceSpec
from .errors import QBackendsError, UnsupportedOptionError

DEVICE_ENV_VARS = ("AMZN_BRAKET_DEVICE_ARN", "QBACKENDS_DEVICE")
MAX_WIRES = 512  # far beyond any state vector; checked before any size arithmetic
MAX_SHOTS = 10**8  # a run's samples: 8 bytes a shot and wire; more is a typo, not a simulation


@dataclass(frozen=True)
class Request:
    """What was asked for, checked.

    Attributes:
        given: the device string as given (None: read from the environment).
        spec: the parsed device string (``given``, else the environment's).
        auto: whether ``spec`` names auto.
        wires: the wires as a device takes them (a count as an ``int``, labels as a list).
        count: how many wires (None: not given).
        fallback: device strings to try after ``spec``.
        precision, diff_method, ignore_memory, decompositions, default_decompositions: as ``get_device`` takes them.
        options: the device options (shots, seed, mpi, ...).
    """

    given: str | None
    spec: DeviceSpec
    auto: bool
    wires: Any
    count: int | None
    fallback: Sequence[str] | None = None
    precision: str = "c128"
    diff_method: str | None = "adjoint"
    ignore_memory: bool = False
    decompositions: Mapping[Any, Callable[..., Any]] | None = None
    default_decompositions: bool = True
    options: Mapping[str, Any] = field(default_factory=dict)


def parse_request(
    spec: str | None,
    wires: Any,
    *,
    fallback: Any = None,
    precision: Any = "c128",
    decompositions: Any = None,
    default_decompositions: Any = True,
    diff_method: Any = "adjoint",
    ignore_memory: Any = False,
    options: Mapping[str, Any] | None = None,
    check_rules: Callable[[Mapping[Any, Any]], Any] | None = None,
) -> Request:
    """Check a request once, at the boundary, and parse it into a ``Request``.

    Args:
        check_rules: checks every key and rule of ``decompositions`` (the decompositions module's ``user_rules``,
            passed by the caller that builds devices: it imports PennyLane).

    Raises:
        UnsupportedOptionError: naming the option, what it takes, and an example.
        DeviceStringError, UnknownBackendError: for a bad device string; one from the environment names its variable.
    """
    options = dict(options or {})
    check_request(precision, diff_method, ignore_memory, fallback, decompositions, default_decompositions, options.get("shots"))
    if decompositions and check_rules is not None:  # every key and rule, before any device (auto builds its candidates later)
        check_rules(decompositions)
    if isinstance(wires, Iterator):  # a generator of labels is read once, here
        wires = list(itertools.islice(wires, MAX_WIRES + 1))
    count = wire_count(wires)
    if isinstance(wires, numbers.Integral):
        wires = int(wires)  # NumPy integers work as they do in qml.device
    parsed = requested_spec(spec)
    return Request(
        spec,
        parsed,
        parsed.is_auto,
        wires,
        count,
        fallback,
        precision,
        diff_method,
        ignore_memory,
        decompositions,
        default_decompositions,
        options,
    )


def device_string_from_env(environ: Mapping[str, str] | None = None) -> str:
    """``AMZN_BRAKET_DEVICE_ARN``, then ``QBACKENDS_DEVICE``, then ``"auto"``."""
    environ = os.environ if environ is None else environ
    for name in DEVICE_ENV_VARS:
        if environ.get(name):
            return environ[name]
    return devicestring.AUTO


def requested_spec(spec: str | None) -> DeviceSpec:
    """The parsed device string of a request: ``spec``, else the environment's (``device_string_from_env``).

    Raises:
        DeviceStringError, UnknownBackendError: for a bad string; one from the environment names its variable.
    """
    return naming_source(spec, lambda: devicestring.parse(device_string_from_env() if spec is None else spec))


def naming_source(spec: str | None, step: Callable[[], Any]) -> Any:
    """``step()``; an error it raises about a device string read from the environment names the variable."""
    try:
        return step()
    except QBackendsError as exc:
        source = next((name for name in DEVICE_ENV_VARS if os.environ.get(name)), None) if spec is None else None
        if source is None:
            raise
        raise type(exc)(f"{exc.message.rstrip('.')} (the device string came from {source}).", exc.fix) from exc


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
    """The options of ``get_device``/``choose`` other than the string and the wires, checked once at the boundary
    (the rules of ``decompositions`` themselves: ``parse_request``'s ``check_rules``).

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
