"""What a backend's PennyLane device accepts: its class, its options, its seed.

The device class is loaded from its ``pennylane.plugins`` entry point once per context; nothing here imports
PennyLane itself (loading a class imports its device's package).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

from .backend import Backend
from .context import Context, get_context
from .errors import BackendUnavailableError, QBackendsError, UnsupportedOptionError

GLOBAL_SEED_BOUND = 2**31 - 1  # what PennyLane-Lightning draws from NumPy's global generator when it is built


def device_class(device_name: str, context: Context) -> Any:
    """The PennyLane device class registered under ``device_name`` (a ``pennylane.plugins`` entry point), looked up
    once per context (reading every distribution's entry points took 90% of building a device)."""
    classes = context.device_classes
    if device_name not in classes:
        found = next((ep for ep in metadata.entry_points(group="pennylane.plugins") if ep.name == device_name), None)
        if found is None:
            raise BackendUnavailableError(
                f"No PennyLane device named {device_name!r} is installed.", "install the package that provides it."
            )
        classes[device_name] = found.load()
    return classes[device_name]


def factory_of(backend: Backend, context: Context) -> Callable[..., Any]:
    """What builds the backend's device: its ``create``, else its PennyLane class's constructor."""
    return backend.create or device_class(backend.device_name, context).__init__


def parameters(factory: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    """``factory``'s signature's parameters, read once per factory (a plugin's unhashable one: each time)."""
    try:
        return _parameters(factory)
    except TypeError:  # unhashable
        return inspect.signature(factory).parameters


@functools.lru_cache(maxsize=256)
def _parameters(factory: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    return inspect.signature(factory).parameters


def accepted_options(factory: Callable[..., Any], params: Mapping[str, inspect.Parameter] | None = None) -> tuple[set[str], bool]:
    """(named keyword options, whether it also takes ``**options``); ``params``: its signature's, read already."""
    params = parameters(factory) if params is None else params
    accepted = {n for n, p in params.items() if n not in ("self", "wires") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return accepted, any(p.kind is p.VAR_KEYWORD for p in params.values())


def accepts_option(backend: Backend, name: str, context: Context | None = None) -> bool:
    """Whether ``get_device`` passes the option ``name`` on to this backend's device (``context``: where its
    device class is kept; the current one by default)."""
    try:
        accepted, open_ended = accepted_options(factory_of(backend, context or get_context()))
    except QBackendsError:
        return False
    return name in accepted or (open_ended and backend.options is not None and name in backend.options)


def accepts_precision(backend: Backend, context: Context) -> bool:
    """Whether the device has a ``c_dtype`` option (asked only on the memory error's path: it imports the device)."""
    try:
        return "c_dtype" in accepted_options(factory_of(backend, context))[0]
    except QBackendsError:
        return False


def build_options(
    backend: Backend, precision: str, options: Mapping[str, Any], context: Context
) -> tuple[Callable[..., Any], dict[str, Any]]:
    """(what builds the backend's device, the keyword arguments to build it with): ``options`` checked
    (``device_options``) and seeded (``seeded``), its signature read once."""
    factory = factory_of(backend, context)
    params = parameters(factory)
    return factory, seeded(params, device_options(backend, factory, precision, options, context, params))


def device_options(
    backend: Backend,
    factory: Callable[..., Any],
    precision: str,
    options: Mapping[str, Any],
    context: Context,
    params: Mapping[str, inspect.Parameter] | None = None,
) -> dict[str, Any]:
    """Check ``options`` against what the device accepts; map ``precision`` to its dtype.

    A plugin's ``create(wires, **options)`` passes options on to its PennyLane device: they are
    checked against that device class's own signature.
    """
    accepted, open_ended = accepted_options(factory, params)
    if open_ended and backend.create is not None:
        try:
            accepted, open_ended = accepted_options(device_class(backend.device_name, context).__init__)
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
        import numpy as np  # a device is being built: NumPy is loaded with it; importing qbackends stays light

        result.setdefault("c_dtype", np.complex64 if precision == "c64" else np.complex128)
    return result


def seeded(params: Mapping[str, inspect.Parameter], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every device takes one number from NumPy's global generator when it is built, as PennyLane's own do
    (``seed="global"``), so a program seeded with ``np.random.seed`` draws the same data whatever the backend;
    a device that does not draw it itself is seeded with it where it takes a ``seed`` (``params``: the
    parameters of what builds it)."""
    seed = params.get("seed")
    if "seed" in kwargs or (seed is not None and seed.default == "global"):
        return kwargs  # given, or the device draws it itself
    import numpy as np  # as above: only while a device is built

    draw = int(np.random.randint(GLOBAL_SEED_BOUND))
    return {**kwargs, "seed": draw} if seed is not None else kwargs
