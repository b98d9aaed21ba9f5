"""Device strings, every ``get_device`` option, and the Backend records plugins register."""

from __future__ import annotations

import json
from importlib import metadata

import numpy as np
import pennylane as qml
from hypothesis import event, given
from hypothesis import strategies as st

from qbackends import Backend, capabilities, choose, devicestring, get_device, hookimpl, screening
from qbackends.capabilities import DIFF_METHODS
from qbackends.device import facts_for
from qbackends.errors import DeviceStringError, PluginError, QBackendsError, UnknownBackendError
from qbackends.kinds import auto_role
from qbackends.registry import build_registry, get_registry

from . import budget
from .strategies import anything, device_strings, diff_methods, junk_text, mostly, names, scalars

INSTALLED = list(metadata.entry_points(group="qbackends"))
PLAIN = build_registry(INSTALLED)  # the installed plugins' registry, built once
REGISTERED = sorted(b.device_string for b in PLAIN.backends.values())
SAMPLING = {b.device_string for b in PLAIN.backends.values() if b.needs_shots}


def typed(exc: QBackendsError) -> None:
    """What every typed error holds: a message of one line naming something, and a fix."""
    event(f"refused: {type(exc).__name__}: {exc.message[:70]}")
    line = exc.one_line()
    assert line and "\n" not in line and exc.message.strip(), repr(exc)
    assert exc.fix.strip(), f"no fix in {line!r}"


@budget(150)
@given(device_strings)
def test_a_device_string_names_a_backend_or_is_refused_by_name(text):
    try:
        spec = devicestring.parse(text)
    except DeviceStringError as exc:
        typed(exc)
        return
    assert str(devicestring.parse(str(spec))) == str(spec)  # what it parsed to reads back as itself
    if spec.is_auto:
        return
    try:
        backend = get_registry().lookup(spec)
    except UnknownBackendError as exc:
        typed(exc)
        return
    assert spec.simulator in (backend.simulator, backend.device_name)


def _wires(tiny: bool):
    labels = st.lists(st.integers(-3, 9) | st.text("abc", max_size=2) | st.none(), min_size=1, max_size=4, unique=True)
    small = st.integers(1, 4) | labels | st.none()
    if tiny:
        return small
    junk = st.integers(-3, 0) | st.integers(45, 2**80) | scalars | st.lists(st.just(0), max_size=520) | st.just([])
    return mostly(small, junk, 9)


_RULE = qml.MultiRZ.compute_decomposition


class Unformattable:
    """A value that fails when formatted: its repr, str and name raise (as a user's object may)."""

    def __repr__(self):
        raise RuntimeError("this object cannot be formatted")

    __str__ = __repr__

    def __getattr__(self, name):
        if name in ("__qualname__", "__name__"):
            raise RuntimeError("this object has no name")
        raise AttributeError(name)


class Unprintable(Unformattable):
    """A replacement rule that fails when formatted, and lowers as ``rule`` does."""

    def __init__(self, rule):
        self.rule = rule

    def __call__(self, *params, wires, **hyperparameters):
        return self.rule(*params, wires=wires, **hyperparameters)


VALID = {  # values each option takes, for some backend
    "precision": st.sampled_from(["c64", "c128"]),
    "diff_method": st.sampled_from(DIFF_METHODS) | st.none(),
    "fallback": st.none() | st.lists(st.sampled_from(REGISTERED), max_size=2),
    "decompositions": st.none()
    | st.sampled_from(
        [
            {"MultiRZ": _RULE},
            {qml.MultiRZ: _RULE},
            {"RX": lambda phi, wires: [qml.RZ(-np.pi / 2, wires), qml.RY(phi, wires), qml.RZ(np.pi / 2, wires)]},
            {"RX": lambda phi, wires: [qml.RX(phi, wires)]},  # a rule that needs itself: refused as it runs
            {"MultiRZ": Unprintable(_RULE)},
        ]
    ),
    "default_decompositions": st.booleans(),
    "shots": st.none() | st.integers(1, 40) | st.just([5, 5]),
    "seed": st.none() | st.integers(0, 2**32),
    "batch_obs": st.booleans(),
    "expected_steps": st.integers(1, 10**5),
    "exclude": st.lists(st.sampled_from(REGISTERED), max_size=2),
}
JUNK = {  # and what none takes
    "precision": scalars,
    "diff_method": diff_methods,
    "fallback": st.lists(device_strings, max_size=3) | scalars,
    "decompositions": st.dictionaries(
        # (built per draw: Hypothesis formats its strategies, and one holding an unformattable value broke its own report)
        st.sampled_from(["MultiRZ", "X", "expval", "Adjoint", "Operation", qml.RX, 3]) | st.builds(Unformattable) | junk_text,
        st.sampled_from([_RULE]) | st.builds(Unprintable, st.just(_RULE)) | st.builds(Unformattable) | scalars,
        max_size=2,
    )
    | scalars,
    "default_decompositions": scalars,
    "shots": st.integers(-2, 0)
    | st.sampled_from([10**8 + 1, 2**70, [(3, 2), 4], (3, 2), [], [0], True, 1.5, "100", np.int64(7), [10**8, 10**8]]),
    "seed": scalars,
    "batch_obs": scalars,
    "expected_steps": st.integers(-(2**70), 0) | scalars,
    "exclude": st.lists(device_strings, max_size=2) | scalars,
    "xtra": scalars,
}


@budget(150)
@given(st.data())
def test_get_device_gives_a_device_that_runs_or_a_typed_error(data):
    spec = data.draw(
        st.none() | st.sampled_from(REGISTERED) | st.sampled_from(["auto", "lightning.qubit"]) | device_strings, "spec"
    )
    chosen = data.draw(st.sets(st.sampled_from(sorted(VALID)), max_size=3), "options")
    options = {name: data.draw(VALID[name], name) for name in sorted(chosen)}
    if data.draw(st.sampled_from([False] * 4 + [True]), "with junk"):
        options.update(data.draw(st.fixed_dictionaries({}, optional=JUNK), "junk"))
    # the memory guard off only where the state is tiny (it is what stands between a request and the allocation)
    tiny = data.draw(st.booleans(), "tiny")
    if tiny:
        options["ignore_memory"] = data.draw(mostly(st.booleans(), scalars.filter(lambda v: v is not True)), "ignore_memory")
    wires = data.draw(_wires(tiny), "wires")
    if data.draw(st.booleans(), "mpi") and spec is not None and "lightning" in spec:
        options["mpi"] = True  # (fused.qubit's would start MPI in this process)
    try:
        dev = get_device(spec, wires=wires, **options)
    except QBackendsError as exc:
        typed(exc)
        return
    assert (wires is None) == (dev.wires is None) and (dev.wires is None or 1 <= len(dev.wires) <= 4), (wires, dev.wires)
    wire = dev.wires[0] if dev.wires is not None else 0

    @qml.qnode(dev)
    def circuit():
        qml.Hadamard(wires=[wire])
        qml.RX(0.3, wires=[wire])
        return qml.expval(qml.Z(wires=[wire]))

    try:
        values = np.ravel(np.asarray(circuit(), dtype=float))  # one value, or one per entry of a shot vector
    except QBackendsError as exc:  # e.g. a sampler asked for an analytic result
        typed(exc)
        return
    except qml.exceptions.DeviceError as exc:  # PennyLane's own refusal of what the device cannot run (shot vectors)
        event(f"refused by the device: {' '.join(str(exc).split())[:60]}")
        return
    event(f"ran on {dev.name}")
    assert np.isfinite(values).all() and (abs(values) <= 1 + 1e-9).all()
    if not options.get("shots") and str(spec) not in SAMPLING:
        assert (abs(values) < 1e-6).all()  # <Z> after H, RX: 0


class _Plugin:
    """A plugin that registers what the test drew."""

    def __init__(self, records):
        self.records = records

    @hookimpl
    def register_backends(self, register):
        for record in self.records:
            register(record)


class _EntryPoint:
    name, dist = "fuzzed", None

    def __init__(self, plugin):
        self.plugin = plugin

    def load(self):
        return self.plugin


def _factory(wires, **options):
    return qml.device("default.qubit", wires=wires, **options)


BACKEND_FIELDS = {
    "hardware": st.sampled_from(["cpu", "nvidia", "amd", "kokkos"]) | scalars,
    "state_copies": st.none() | st.floats(-5, 1e6) | scalars,
    "dense_adjoint_observables": st.booleans() | scalars,
    "preference": st.integers(-3, 3) | scalars,
    "min_auto_wires": st.integers(-3, 40) | scalars,
    "description": junk_text | scalars,
    "capabilities_file": st.none()
    | st.tuples(
        st.sampled_from(["pennylane-lightning", "nosuch"]),
        st.sampled_from(["pennylane_lightning/lightning_qubit/lightning_qubit.toml", "x.toml"]),
    )
    | anything,
    "extra": st.none() | names | scalars,
    "create": st.none() | st.just(_factory) | scalars,
    "options": st.none() | st.tuples(names) | anything,
    "needs_shots": st.booleans() | scalars,
    "install": st.none() | junk_text | scalars,
}


def _record():
    return st.builds(
        lambda provider, simulator, device_name, distribution, extra: Backend(
            provider, simulator, device_name, distribution, **extra
        ),
        names | junk_text | scalars,
        names | junk_text | scalars,
        st.sampled_from(["default.qubit", "lightning.qubit", "nosuch.device"]) | junk_text | scalars,
        st.sampled_from(["pennylane", "pennylane-lightning", "nosuch-dist"]) | scalars,
        st.fixed_dictionaries({}, optional=BACKEND_FIELDS),
    )


@budget(150)
@given(st.lists(_record() | anything, min_size=1, max_size=3), st.integers(1, 5))
def test_a_plugins_backend_records_are_kept_or_refused_and_never_break_the_host(records, wires):
    registry = build_registry([*INSTALLED, _EntryPoint(_Plugin(records))])
    assert set(PLAIN.backends) <= set(registry.backends)  # the others' backends, whatever this one registered
    added = [registry.backends[k] for k in set(registry.backends) - set(PLAIN.backends)]
    refused = [f for f in registry.failures if f.plugin == "fuzzed"]
    assert len(added) + len(refused) == len(records)
    event(f"{len(added)} kept, {len(refused)} refused")
    for failure in refused:
        assert failure.error.startswith(f"{PluginError.__name__}: Plugin 'fuzzed' registered "), failure.error
    facts = facts_for(registry)
    for backend in added:
        caps = capabilities.evaluate(backend, facts)
        json.dumps(caps.to_json())
        auto_role(backend)
        assert str(devicestring.parse(backend.device_string)) == backend.device_string
        try:
            choose(backend.device_string, wires, registry=registry, facts=facts)
        except QBackendsError as exc:
            typed(exc)
    for candidate in screening.without_circuit(registry, facts, wires):
        assert candidate.key in registry.backends


@budget(40)
@given(st.sampled_from(REGISTERED), st.sampled_from(["c64", "c128"]), diff_methods, st.integers(1, 60))
def test_the_memory_guard_and_capabilities_answer_for_every_registered_backend(spec, precision, method, wires):
    registry = get_registry()
    facts = facts_for(registry)
    backend = registry.lookup(devicestring.parse(spec))
    try:
        choice = choose(spec, wires, precision=precision, diff_method=method, facts=facts)  # (free memory moves)
    except QBackendsError as exc:
        typed(exc)
        return
    caps = choice.capabilities
    assert choice.backend == backend and caps.ok and (caps.max_wires is None or wires <= caps.max_wires)
    assert caps == capabilities.evaluate(backend, facts, precision, method)
    assert np.isfinite(capabilities.working_set_bytes(backend, wires, precision, method))
