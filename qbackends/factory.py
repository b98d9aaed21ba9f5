"""The factory: one named backend's device, built for a request, with its decomposition rules attached.

``build`` builds one screened backend (``screening.Choice``); ``build_requested`` screens a request's
backends (its own, then its ``fallback``) and builds the first that constructs. The auto device builds its
candidates with ``build``, as ``get_device`` builds a named backend.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pennylane as qml

from . import capabilities
from . import decompositions as rules
from .backend import Backend
from .context import Context
from .deviceoptions import accepts_option, build_options
from .errors import BackendUnavailableError, QBackendsError, UnsupportedOptionError
from .request import Request
from .screening import Choice, check_request_on, guarded_wires, machine, node_ranks, ranks_share_state, requested_chain, screen

log = logging.getLogger("qbackends")


def build_requested(request: Request, context: Context) -> Any:
    """The device of the first backend of the request's chain (its backend, then ``fallback``) that runs here, fits
    and constructs; a backend that fails at construction is recorded in the context and passed over.

    Raises:
        QBackendsError: a typed subclass saying what is wrong and how to fix it.
    """
    facts = machine(context)
    chain = requested_chain(request, context.registry, facts)
    fit, refusals = screen(
        chain,
        guarded_wires(request),
        request.precision,
        request.diff_method,
        request.ignore_memory,
        facts,
        True,
        context,
        mpi=node_ranks() if request.options.get("mpi") else 0,
        shared=ranks_share_state(request.options),
    )
    for choice in fit:
        try:
            device = build(request, choice, context)
            break
        except BackendUnavailableError as exc:
            if choice.backend.device_name not in context.build_failures or choice is fit[-1]:
                raise
            refusals.append(exc)
    if choice.backend != chain[0] and not request.auto:  # a fallback= took over: say so
        log.warning(
            "qbackends: using %s instead of %s: %s", choice.backend.device_string, chain[0].device_string, refusals[0].message
        )
    return device


def build(request: Request, choice: Choice, context: Context) -> Any:
    """The chosen backend's device for ``request``, its decomposition rules attached (the backend's defaults unless
    turned off, the request's own always).

    Raises:
        UnsupportedOptionError: the backend refused this request.
        BackendUnavailableError: the backend cannot be built here at all (recorded in the context).
    """
    check_request_on(choice.backend, request)
    options = request.options
    if request.ignore_memory and accepts_option(choice.backend, "ignore_memory", context):  # it sizes circuits itself
        options = {**options, "ignore_memory": True}
    device = construct(choice, request.wires, request.precision, options, context)
    declared = choice.capabilities.operations
    if not declared.native:
        declared = capabilities.declared_by_device(device)
    if request.decompositions:  # a user's rules (callables, by identity): combined for this device alone
        ruleset = rules.build_ruleset(
            context.registry.rules(), choice.backend, declared, request.decompositions, request.default_decompositions
        )
    else:
        key = (choice.backend.key, declared, request.default_decompositions)
        ruleset = context.rulesets.get(key)
        if ruleset is None:
            ruleset = context.rulesets[key] = rules.build_ruleset(
                context.registry.rules(), choice.backend, declared, None, request.default_decompositions
            )
    context.registry.warn_of_refused_rules(choice.backend)
    return rules.attach(device, ruleset)


def construct(choice: Choice, wires: Any, precision: str, options: Mapping[str, Any], context: Context) -> Any:
    """The chosen backend's PennyLane device, as it comes (no rules).

    A failure that the request caused (its wires or options) is the request's error; one that a
    plain one-wire construction repeats means the backend is broken here, and is recorded in the
    context so that ``auto`` and ``fallback=`` pass over it.

    Raises:
        UnsupportedOptionError: the backend refused this request.
        BackendUnavailableError: the backend cannot be built here at all.
    """
    backend = choice.backend
    _, kwargs = build_options(backend, precision, options, context)
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
        context.build_failures[backend.device_name] = message
        raise BackendUnavailableError(
            f"{backend.device_string} failed at construction: {message}",
            capabilities.construction_fix(backend.hardware)
            + f", or pass fallback=[...] to get_device; `qbackends probe {backend.device_string}` shows the details.",
        ) from exc


def _construct(backend: Backend, wires: Any, kwargs: Mapping[str, Any]) -> Any:
    if backend.create is not None:
        return backend.create(wires=wires, **kwargs)
    return qml.device(backend.device_name, wires=wires, **kwargs)


def _constructs_plainly(backend: Backend) -> bool:
    """Whether the backend builds with one wire and no options: then a failure was the request's."""
    try:
        _construct(backend, 1, {})
    except Exception:  # noqa: BLE001 - any failure here means the backend is broken
        return False
    return True
