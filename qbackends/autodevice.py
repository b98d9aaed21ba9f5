"""``qbackends.auto``: a PennyLane device that runs each circuit on the backend fastest for it here.

For each circuit it is given, the device asks ``qbackends.auto`` which backend to take (once per
circuit structure), then hands that backend the circuit: its preprocessing, its execution, its
derivatives and VJPs. Results are exactly that backend's. The choice travels with the circuit in
the execution config (``device_options["qbackends.auto"]``), so every later call of the same
execution goes to the same backend. ``qml.device("qbackends.auto", wires=n)`` opens it too, as
Braket's example scripts open the device string a job is given.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.devices import Device, ExecutionConfig
from pennylane.transforms import convert_to_numpy_parameters
from pennylane.transforms.core import BoundTransform

from . import auto, decisionstore
from .context import get_context
from .decompositions import user_rules
from .deviceoptions import GLOBAL_SEED_BOUND, accepts_option
from .devicestring import AUTO, DeviceSpec
from .errors import EnvironmentSettingError, UnsupportedCircuitError, UnsupportedOptionError
from .factory import build
from .request import Request, parse_request, wire_count
from .screening import auto_candidates, machine, screen
from .shiftrules import no_shift_rule, numerical, refusal
from .simbase.measured import check_sampled, sampled_pauli_terms

log = logging.getLogger("qbackends")

CHOICE = "qbackends.auto"  # the execution config's device option that carries the chosen backend's key
UNTAGGED_KEPT = 16  # configs set up lately, kept with their backend's own config (without CHOICE)


class AutoQubit(Device):
    """Picks, per circuit, the fastest backend that runs it here, and delegates to it.

    Args:
        wires: number of wires or their labels.
        exclude: device strings ``auto`` must not take (with ``QBACKENDS_AUTO_EXCLUDE``).
        expected_steps: how often each circuit will run; its trials stay a small share of that.
        precision, decompositions, default_decompositions, diff_method, ignore_memory, **options:
            as for ``get_device``; each candidate is built with them (one that refuses them is left out).

    Attributes:
        expected_steps: as given.
        last_choice: the device string of the backend that took the last circuit.
        decisions: every decision made on this device so far (``auto.Decision``), newest last.
    """

    name = "qbackends.auto"

    def __init__(
        self,
        wires: Any = None,
        *,
        exclude: Sequence[str] = (),
        expected_steps: int = 100,
        precision: str = "c128",
        decompositions: Any = None,
        default_decompositions: bool = True,
        diff_method: str | None = "adjoint",
        ignore_memory: bool = False,
        **options: Any,
    ) -> None:
        request = parse_request(
            AUTO,
            None,  # the wires as PennyLane's Device takes them, counted after (``_start``)
            precision=precision,
            decompositions=decompositions,
            default_decompositions=default_decompositions,
            diff_method=diff_method,
            ignore_memory=ignore_memory,
            options=options,
            check_rules=user_rules,
        )
        self._start(request, wires, exclude, expected_steps)

    @classmethod
    def from_request(cls, request: Request) -> AutoQubit:
        """The auto device for a request ``get_device`` parsed (checked there, once); ``exclude`` and
        ``expected_steps`` come among its options."""
        options = dict(request.options)
        exclude = options.pop("exclude", ())
        expected_steps = options.pop("expected_steps", 100)
        device = cls.__new__(cls)
        device._start(replace(request, options=options), request.wires, exclude, expected_steps)
        return device

    def _start(self, request: Request, wires: Any, exclude: Sequence[str], expected_steps: Any) -> None:
        if isinstance(expected_steps, bool) or not isinstance(expected_steps, int) or expected_steps < 1:
            raise UnsupportedOptionError(
                f"expected_steps={expected_steps!r:.60} is not a number of steps; auto spreads one-time costs over them.",
                "pass expected_steps=N, a whole number of 1 or more (how often the circuit will run), or leave it out (100).",
            )
        options = dict(request.options)
        self._devices: dict[str, Any] = {}
        self._trial_devices: dict[str, Any] = {}
        self._tracker: Any = None
        super().__init__(wires=wires, shots=options.get("shots"))
        # The backends get the wires as given: a count keeps them on standard labels (labels cost a mapping per execution).
        self._wires_given = wires if wires is None or isinstance(wires, int) else list(self.wires)
        self._context = get_context()
        self._registry = self._context.registry
        count = request.count
        if count is None and self.wires is not None:  # built directly (qml.device): counted here
            count = wire_count(list(self.wires))
        self._count = count
        choices = auto_candidates(
            self._context, count, request.precision, request.diff_method, request.ignore_memory, exclude=exclude
        )
        self._choices = {choice.backend.key: choice for choice in choices}
        self._candidates = [choice.backend for choice in choices]
        # One number from NumPy's global generator, as a PennyLane device takes when built: a program seeded
        # with np.random.seed draws the same data as with qml.device; it seeds every backend's sampler.
        self._seed = options.pop("seed", None)
        if self._seed is None or isinstance(self._seed, str):  # None or "global": drawn, as lightning does
            self._seed = int(np.random.randint(GLOBAL_SEED_BOUND))
        self._request = replace(request, options=options, wires=self._wires_given, count=count)
        self._build = {
            "precision": request.precision,
            "decompositions": request.decompositions,
            "default_decompositions": request.default_decompositions,
            "diff_method": request.diff_method,
            "ignore_memory": request.ignore_memory,
            **options,
        }
        setup = (
            [b.key for b in self._candidates],
            list(self.wires.labels) if self.wires is not None else None,
            dict(self._build),
            expected_steps,
        )
        self._decisions = self._context.decisions.setdefault(
            (tuple(setup[0]), tuple(self.wires) if self.wires is not None else None, _frozen(self._build), expected_steps),
            {},
        )
        self._setup = setup  # what a stored decision's key says of this setup
        self.expected_steps = expected_steps
        self.decisions: list[auto.Decision] = []
        self.last_choice: str | None = None
        self.last_backend: Any = None
        self._last: tuple[Any, Any, auto.Decision] | None = None  # the tape asked about last, and its decision
        self._asked: tuple[Any, dict[tuple[str, Any], bool]] = (None, {})  # that tape, and backends' supports_derivatives
        self._observables = auto.ObservableKeys()
        self._untagged: dict[int, tuple[ExecutionConfig, ExecutionConfig, auto.Decision | None]] = {}
        # id(tagged) -> (tagged, the backend's own, the decision its circuit was set up by)

    # ---- the tracker reaches the backends ------------------------------------------------------

    @property  # type: ignore[override]
    def tracker(self) -> Any:
        return self._tracker

    @tracker.setter
    def tracker(self, value: Any) -> None:
        self._tracker = value
        for device in self._devices.values():
            device.tracker = value

    # ---- candidates, built when first needed ---------------------------------------------------

    def _device(self, key: str, trial: bool = False) -> Any:
        """The backend's device for this auto device's circuits; ``trial``: another instance, seeded apart, for a
        trial that samples (the circuits' own sampler is not advanced by trying)."""
        built = self._trial_devices if trial else self._devices
        device = built.get(key)
        if device is None:
            backend = self._registry.backends[key]
            seed = {"seed": self._seed + 1 if trial else self._seed} if accepts_option(backend, "seed", self._context) else {}
            request = replace(
                self._request,
                given=backend.device_string,
                spec=DeviceSpec(backend.provider, backend.simulator),
                auto=False,
                options={**self._request.options, **seed},
            )
            choice = self._choices[key]
            if backend.device_name in self._context.build_failures:  # failed since: screened again, for its reason
                r, facts = request, machine(self._context)
                fit, _ = screen([backend], self._count, r.precision, r.diff_method, r.ignore_memory, facts, False, self._context)
                choice = fit[0]
            if seed:  # seeded: it draws nothing from NumPy's global generator
                device = build(request, choice, self._context)
            else:  # a backend built here draws nothing more from NumPy's global generator (saving it costs 70 µs)
                state = np.random.get_state()
                try:
                    device = build(request, choice, self._context)
                finally:
                    np.random.set_state(state)
            if not trial:
                device.tracker = self._tracker
            built[key] = device
        return device

    def _decide(self, config: ExecutionConfig, circuit: Any) -> auto.Decision:
        last = self._last
        if last is not None and last[0] is circuit and last[1] == config.gradient_method:
            return last[2]  # PennyLane asks again about the same tape within one execution
        trainable = list(circuit.trainable_params)  # as the interface marked them
        key = auto.structure_key(circuit, trainable, config.gradient_method, self._observables)
        decision = self._decisions.get(key)
        if decision is not None and decision.off():  # its backend runs over twice slower than expected: once more
            log.info(
                "qbackends: auto: %s took %.3g ms a step, %.3g ms expected; deciding again.",
                decision.backend,
                decision.seconds / decision.steps * 1e3,
                decision.expected() * 1e3,
            )
            decision.revisited = True
            self._decisions.pop(key)
            decision = self._new_decision(config, circuit, trainable, key, revisit=True)
        elif decision is None:
            decision = self._new_decision(config, circuit, trainable, key)
        self.last_backend = self._registry.backends[decision.backend]
        self.last_choice = self.last_backend.device_string
        self._last = (circuit, config.gradient_method, decision)
        if not self.decisions or self.decisions[-1] is not decision:
            self.decisions.append(decision)
        return decision

    def _new_decision(
        self, config: ExecutionConfig, circuit: Any, trainable: list[int], key: Any, revisit: bool = False
    ) -> auto.Decision:
        """Decide for a circuit structure not seen on this setup: from the store, else from the model and a trial
        (within ``auto.trial_budget``), the circuit's family correcting the model; kept here and in the store."""
        check_sampled(circuit, self.name)  # no backend samples it: one line, not one per candidate
        stored_key = decisionstore.stable_digest(self._setup, key)
        store = auto.store(self._context)
        if stored_key is not None and not revisit:
            stored = store.get(stored_key)
            if stored is not None and stored.backend in self._choices and self._takes(stored.backend, config, circuit):
                try:  # the circuit in words again, from a file that may have been edited
                    shape = auto.Shape(**stored.shape)
                    shape.describe()
                except Exception:  # noqa: BLE001 - a stored shape that does not make one is left out of the log line
                    shape = None
                decision = auto.Decision(
                    stored.backend,
                    stored.predicted,
                    stored.measured,
                    stored.refused,
                    shape,
                    source=f"the decision stored {stored.stored}, no trial (qbackends probe auto lists them)",
                )
                self._keep(key, decision, circuit, trainable, config)
                auto.log_decision(decision, self._registry.backends[decision.backend])
                return decision
        wires = self._count or len(circuit.wires)
        family = (auto.family_key(circuit, wires, config.gradient_method), len(trainable))
        gates = len(circuit.operations)
        member = None if revisit else auto.family_member(self._context.family_members.get(family, ()), gates)
        if (
            member is not None
            and member[1].backend in self._choices
            and self._member_taken(family, member[1].backend, config, circuit)
        ):
            size, earlier = member
            expected = earlier.expected()
            decision = auto.Decision(
                earlier.backend,
                predicted={earlier.backend: expected * max(gates, 1) / max(size, 1)} if expected else {},
                source=f"as decided for a circuit of its family ({size} gates, {earlier.backend}), no trial",
            )
            self._keep(key, decision, circuit, trainable, config)
            auto.log_decision(decision, self._registry.backends[decision.backend])
            return decision
        tape = _as_numpy(circuit, trainable)
        shape = auto.shape_of(tape or circuit, wires, config.gradient_method, trainable)
        methods, refused = auto.gradient_methods(self._candidates, config.gradient_method, bool(circuit.shots))
        if not methods:
            auto.raise_refused(auto.Decision("", refused=refused))
        runs, resolved, refusing = self._runs(config, circuit, shape, [b.key for b in self._candidates if b.key in methods])
        methods.update(resolved)  # "best" as each backend resolves it for this circuit
        refused.update(refusing)
        candidates = [b for b in self._candidates if b.key in runs]
        if not candidates:
            auto.raise_refused(auto.Decision("", refused=refused))
        measure = None if tape is None else self._trial(config, circuit, tape)
        precision = self._build["precision"]
        model = auto.model(self._context)  # (every candidate's preprocessing took the circuit: nothing to accept)
        corrections = dict(self._context.families.get(family, {}))
        budget = auto.trial_budget(self._context)
        if revisit:
            budget = max(budget, auto.TRIAL_BUDGET_SECONDS)
        start = time.perf_counter()
        decision = auto.decide(
            shape, methods, candidates, model, measure, self.expected_steps, None, precision, runs, budget, corrections
        )
        if decision.measured:
            self._context.trial_seconds += time.perf_counter() - start
            auto.learn(self._context.families, family, decision, corrections)
        elif measure is not None and corrections:
            decision.source = "as the family's earlier trials corrected the model"
        decision.refused = {**refused, **decision.refused}
        decision.revisited = revisit
        self._keep(key, decision, circuit, trainable, config)
        members = self._context.family_members.setdefault(family, [])
        members[:] = [m for m in members if m[0] != gates] + [(gates, decision)]
        if stored_key is not None and not decision.untried:  # an untried close call is tried by a later process
            store.put(
                stored_key, decision.backend, decision.predicted, decision.measured, decision.refused, shape, shape.describe()
            )
        auto.log_decision(decision, self._registry.backends[decision.backend], precision)
        return decision

    def _takes(self, key: str, config: ExecutionConfig, circuit: Any) -> bool:
        """Whether the backend's preprocessing and gradient take ``circuit`` (as ``_runs`` asks, for one backend)."""
        try:
            device, resolved = self._prepared(key, config, circuit)
            device.preprocess_transforms(resolved)((circuit,))
        except EnvironmentSettingError:
            raise  # the user's setting, not this backend's refusal
        except Exception:  # noqa: BLE001 - it refuses this circuit: decided in full, where the refusal is said
            return False
        return True

    def _member_taken(self, family: Any, key: str, config: ExecutionConfig, circuit: Any) -> bool:
        """``_takes`` for a member of ``family`` (the same gate kinds, measurements, gradient, shots and number of
        trainable parameters): asked once per family, backend, setup and how many trainable parameters the
        observables hold (a gradient of observable data is what a backend's preprocessing refuses there)."""
        in_operations = sum(len(op.data) for op in circuit.operations)  # parameters after these: the observables'
        taken = (family, sum(i >= in_operations for i in circuit.trainable_params), key, _frozen(self._build))
        if taken in self._context.taken:
            return True
        if not self._takes(key, config, circuit):
            return False
        self._context.taken.add(taken)
        return True

    def _keep(self, key: Any, decision: auto.Decision, circuit: Any, trainable: list[int], config: ExecutionConfig) -> None:
        """Keep ``decision`` for its structure; under "best" or a method PennyLane runs as a transform ("parameter-shift"),
        also for the gradient transform PennyLane runs where the chosen backend has no gradient of its own for the
        circuit (PennyLane asks again with that transform, for the step the trial timed)."""
        self._decisions[key] = decision
        method = config.gradient_method
        if isinstance(method, str) and method in _TRANSFORMS and not self._differentiates(decision, config, circuit):
            shifted = _TRANSFORMS[method]()
            self._decisions[auto.structure_key(circuit, trainable, shifted, self._observables)] = decision

    def _runs(
        self, config: ExecutionConfig, circuit: Any, shape: auto.Shape, keys: list[str]
    ) -> tuple[dict[str, auto.Shape], dict[str, str | None], dict[str, str]]:
        """Each backend's view of the circuit, from its own preprocessing (``auto.as_run``: its operations, the
        executions it makes of it); the gradient method it resolves the one asked for to (its own, or the
        transform PennyLane runs instead); and the backends whose preprocessing refuses the circuit, with why."""
        runs, methods, refused = {}, {}, {}
        for key in keys:
            try:
                device, resolved = self._prepared(key, config, circuit)
                tapes, _ = device.preprocess_transforms(resolved)((circuit,))
            except EnvironmentSettingError:
                raise  # the user's setting, not this backend's refusal
            except Exception as exc:  # noqa: BLE001 - a backend that refuses this circuit is passed over
                refused[key] = auto.reason(exc)
                continue
            runs[key] = auto.as_run(shape, tapes)
            method = resolved.gradient_method
            methods[key] = method if isinstance(method, str) or method is None else getattr(method, "__name__", "transform")
        return runs, methods, refused

    def _trial(self, config: ExecutionConfig, circuit: Any, tape: Any) -> Callable[[str], float]:
        """``measure(key)``: seconds of one step of ``circuit`` (as ``tape``, in NumPy) on that backend,
        preprocessing to results."""

        sampled = bool(circuit.shots)

        def measure(key: str) -> float:
            device, resolved = self._prepared(key, config, circuit, trial=sampled)
            program = device.preprocess_transforms(resolved)
            # Which parameters stay trainable after this backend's preprocessing: the interface's own tensors say.
            marked, _ = program((circuit,))
            trainable = [qml.math.get_trainable_indices(t.get_parameters(trainable_only=False)) for t in marked]
            tracker, device.tracker = device.tracker, qml.Tracker()  # a trial is not the user's execution
            try:
                start = time.perf_counter()
                _run_step(device, program, resolved, tape, [sorted(t) for t in trainable])
                seconds = time.perf_counter() - start
            finally:
                device.tracker = tracker
            return seconds * auto.backprop_factor(self._context, key) if resolved.gradient_method == "backprop" else seconds

        return measure

    def may_run_natively(self, operation: str) -> bool:
        """Whether a backend this device may take declares ``operation`` native (runs it as one operation)."""
        return any(operation in choice.capabilities.operations.native for choice in self._choices.values())

    def backend_for(self, circuit: Any, gradient_method: str | None = "adjoint", interface: str = "auto") -> Any:
        """The backend's device ``auto`` takes for ``circuit`` (a tape), deciding now if it has not yet.

        For code that runs a backend's own fast path, such as qbackends' compiled ``TorchLayer``.
        """
        config = ExecutionConfig(gradient_method=gradient_method, interface=interface)
        return self._device(self._decide(config, circuit).backend)

    def _prepared(self, key: str, config: ExecutionConfig, circuit: Any, trial: bool = False) -> tuple[Any, ExecutionConfig]:
        """A backend's device and its execution config for ``circuit``; raises where it has not the gradient asked for."""
        device = self._device(key, trial)
        resolved = device.setup_execution_config(
            _as_pennylane_resolves(device, config, circuit, lambda: self._asks(key, config, circuit)), circuit
        )
        method = resolved.gradient_method
        if not circuit.shots and (reason := no_shift_rule(circuit)) and method != "backprop" and not numerical(method):
            own = getattr(device, "differentiates", None)  # a qbackends simulator's own gradient; else the device's word
            takes = own(circuit) if own is not None else device.supports_derivatives(resolved, circuit)
            if not (resolved.gradient_method == "adjoint" and takes):
                raise refusal(device.name, reason, "its own gradient does not take it")
        return device, resolved

    def _chosen(self, config: ExecutionConfig | None) -> Any:
        """The backend ``config`` was set up for; without one (called with no config, or one set up without a
        circuit), the backend ``auto`` takes for circuits it has not seen: its first candidate."""
        key = (config.device_options or {}).get(CHOICE) if config is not None else None
        return self._device(key if key is not None else self._candidates[0].key)

    # ---- the device API: decide in setup, delegate the rest ------------------------------------

    def setup_execution_config(self, config: ExecutionConfig | None = None, circuit: Any = None) -> ExecutionConfig:
        config = config or ExecutionConfig()
        chosen = (config.device_options or {}).get(CHOICE)
        plain = self._plain(config)
        decision = None
        if chosen is not None and self._last is not None and self._last[0] is circuit:
            decision = self._last[2]  # PennyLane sets a copy of the config up again for the same circuit
        if chosen is None and circuit is not None:
            decision = self._decide(plain, circuit)
            decision.steps += 1
            chosen = decision.backend
        elif chosen is None:
            chosen = self._candidates[0].key
        resolved = self._device(chosen).setup_execution_config(plain, circuit)
        tagged = dataclasses.replace(resolved, device_options={**(resolved.device_options or {}), CHOICE: chosen})
        self._untagged[id(tagged)] = (tagged, resolved, decision)
        while len(self._untagged) > UNTAGGED_KEPT:
            del self._untagged[next(iter(self._untagged))]
        return tagged

    def _plain(self, config: ExecutionConfig | None) -> ExecutionConfig | None:
        """``config`` without the auto device's own option (a backend checks the options it is given). PennyLane
        hands the config set up here to every later call of the execution: that one is looked up, not rebuilt."""
        known = self._untagged.get(id(config))
        if known is not None and known[0] is config:
            return known[1]
        return _plain(config)

    def preprocess_transforms(self, execution_config: ExecutionConfig | None = None) -> Any:
        pipeline = self._chosen(execution_config).preprocess_transforms(self._plain(execution_config))
        pipeline.insert(0, BoundTransform(sampled_pauli_terms))  # PennyLane 0.45's sampler loses results without it
        return pipeline

    def supports_derivatives(self, execution_config: ExecutionConfig | None = None, circuit: Any = None) -> bool:
        if execution_config is not None and CHOICE in (execution_config.device_options or {}):
            return self._chosen(execution_config).supports_derivatives(self._plain(execution_config), circuit)
        if execution_config is None or circuit is None:  # can any candidate: asked before any circuit is known
            methods, _ = auto.gradient_methods(
                self._candidates, execution_config.gradient_method if execution_config else "best", False
            )
            return bool(methods)
        return self._differentiates(self._decide(execution_config, circuit), execution_config, circuit)

    def _differentiates(self, decision: auto.Decision, config: ExecutionConfig, circuit: Any) -> bool:
        """The decided backend's ``supports_derivatives`` for ``circuit``, asked once per structure and gradient method
        (PennyLane asks it two or three times per execution under "best"; lightning's lowers the circuit each time)."""
        known = decision.derivatives.get(config.gradient_method)
        if known is None:
            known = decision.derivatives[config.gradient_method] = self._asks(decision.backend, config, circuit)
        return known

    def _asks(self, key: str, config: ExecutionConfig, circuit: Any) -> bool:
        """Backend ``key``'s ``supports_derivatives(config, circuit)``, asked once per method for the circuit asked
        about last (a new structure's decision asks it as it prepares, keeps and runs the circuit)."""
        if self._asked[0] is not circuit:
            self._asked = (circuit, {})
        answers = self._asked[1]
        if (key, config.gradient_method) not in answers:
            answers[key, config.gradient_method] = self._device(key).supports_derivatives(config, circuit)
        return answers[key, config.gradient_method]

    def supports_vjp(self, execution_config: ExecutionConfig | None = None, circuit: Any = None) -> bool:
        if execution_config is not None and CHOICE in (execution_config.device_options or {}):
            return self._chosen(execution_config).supports_vjp(self._plain(execution_config), circuit)
        return False

    def supports_jvp(self, execution_config: ExecutionConfig | None = None, circuit: Any = None) -> bool:
        if execution_config is not None and CHOICE in (execution_config.device_options or {}):
            return self._chosen(execution_config).supports_jvp(self._plain(execution_config), circuit)
        return False

    def _run(self, method: str, config: ExecutionConfig | None, *args: Any) -> Any:
        """The chosen backend's ``method``, timed: the work it does for the user (``auto.trial_budget``) and the
        steps of its decision (``Decision.off``)."""
        known = self._untagged.get(id(config))
        start = time.perf_counter()
        try:
            return getattr(self._chosen(config), method)(*args, self._plain(config))
        finally:
            seconds = time.perf_counter() - start
            self._context.work_seconds += seconds
            if known is not None and known[0] is config and known[2] is not None:
                known[2].seconds += seconds

    def execute(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self._run("execute", execution_config, circuits)

    def compute_derivatives(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self._run("compute_derivatives", execution_config, circuits)

    def execute_and_compute_derivatives(self, circuits: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self._run("execute_and_compute_derivatives", execution_config, circuits)

    def compute_vjp(self, circuits: Any, cotangents: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self._run("compute_vjp", execution_config, circuits, cotangents)

    def execute_and_compute_vjp(self, circuits: Any, cotangents: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self._run("execute_and_compute_vjp", execution_config, circuits, cotangents)

    def compute_jvp(self, circuits: Any, tangents: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self._run("compute_jvp", execution_config, circuits, tangents)

    def execute_and_compute_jvp(self, circuits: Any, tangents: Any, execution_config: ExecutionConfig | None = None) -> Any:
        return self._run("execute_and_compute_jvp", execution_config, circuits, tangents)


def running_name(device: Any) -> str:
    """The PennyLane name of what runs ``device``'s circuits: for the auto device, the backend it took last."""
    backend = getattr(device, "last_backend", None) if isinstance(device, AutoQubit) else None
    return str(backend.device_name if backend is not None else device.name)


def _plain(config: ExecutionConfig | None) -> ExecutionConfig | None:
    """``config`` without the auto device's own option (a backend checks the options it is given)."""
    if config is None or CHOICE not in (config.device_options or {}):
        return config
    return dataclasses.replace(config, device_options={k: v for k, v in config.device_options.items() if k != CHOICE})


def _as_pennylane_resolves(device: Any, config: ExecutionConfig, circuit: Any, supported: Callable[[], bool]) -> ExecutionConfig:
    """``config`` as PennyLane's workflow hands it to ``device`` for ``circuit``: a method the device differentiates
    by itself as it is, else (best, parameter-shift, finite-diff, spsa) the gradient transform PennyLane runs instead.
    The device's own setup is asked only after that, as PennyLane asks it: lightning sets "best" up as adjoint even
    with shots, where PennyLane never asks it to and shifts the parameters.

    ``supported()``: the device's ``supports_derivatives(config, circuit)``.

    Raises:
        UnsupportedCircuitError: where the device has not the gradient of its own asked for (adjoint, backprop, device).
    """
    method = config.gradient_method
    if not isinstance(method, str) or method not in auto.DEVICE_GRADIENTS + tuple(_TRANSFORMS):
        return config
    if supported():
        return config
    if method not in _TRANSFORMS:
        raise UnsupportedCircuitError(f"{device.name} has no {method} gradient for this circuit.")
    return dataclasses.replace(config, gradient_method=_TRANSFORMS[method]())


_TRANSFORMS = {  # what PennyLane differentiates by where the device does not (workflow.resolution, 0.45)
    "best": lambda: qml.gradients.param_shift,
    "parameter-shift": lambda: qml.gradients.param_shift,
    "finite-diff": lambda: qml.gradients.finite_diff,
    "spsa": lambda: qml.gradients.spsa_grad,
}


def _frozen(value: Any) -> Any:
    """``value`` (the options auto builds its backends with) as part of a key: plain values by value, containers by
    their items, anything else (a user's rule, an array) by identity, held by the key so that no later object takes
    its id. Never by ``repr``: a user's object may raise there, and two of them may print alike."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return value
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *(_frozen(v) for v in value))
    if isinstance(value, Mapping):
        return ("mapping", *((_frozen(k), _frozen(v)) for k, v in value.items()))
    return _Same(value)


class _Same:
    """A key part that is equal only to itself's object."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value


def _as_numpy(circuit: Any, trainable: list[int]) -> Any:
    """The circuit with its parameters as NumPy values (a trial must not touch the caller's autodiff graph),
    the trainable ones as the interface marks them; None where PennyLane cannot rebind them (a scalar times
    a sum of terms in 0.45), and the circuit is then decided without a trial."""
    try:
        (tape,), _ = convert_to_numpy_parameters(circuit)
    except (IndexError, ValueError, TypeError):
        return None
    tape.trainable_params = trainable
    return tape


def _ones_like(results: Any) -> Any:
    if isinstance(results, (tuple, list)):
        return type(results)(_ones_like(r) for r in results)
    return np.ones_like(np.asarray(results, dtype=float))


def _run_step(device: Any, program: Any, config: ExecutionConfig, tape: Any, trainable: list[list[int]]) -> None:
    """One step as PennyLane runs it on ``device``: preprocessing, execution, and the gradient ``config`` asks for
    (of the parameters ``trainable`` marks in each preprocessed tape, as the interface marks them in a real run)."""
    method = config.gradient_method
    tapes, post = program((tape,))
    if len(trainable) == len(tapes):
        for t, indices in zip(tapes, trainable, strict=True):
            t.trainable_params = indices
    if method in ("adjoint", "device") and config.use_device_gradient:
        if config.use_device_jacobian_product:
            results = device.execute(tapes, config)
            device.compute_vjp(tapes, _ones_like(results), config)
        elif config.grad_on_execution:
            results, _ = device.execute_and_compute_derivatives(tapes, config)
        else:
            results = device.execute(tapes, config)
            device.compute_derivatives(tapes, config)
    elif callable(method) and any(t.trainable_params for t in tapes):  # a gradient transform: its tapes run too
        # on the preprocessed tapes, as PennyLane applies it (a template's own parameters have no shift rule)
        gradient_tapes = [g for t in tapes if t.trainable_params for g in method(t)[0]]
        more, _ = program(tuple(gradient_tapes))
        results = device.execute(tuple(tapes) + tuple(more), config)[: len(tapes)]
    else:  # values, or backprop (its backward pass is the ML framework's: the model's factor accounts for it)
        results = device.execute(tapes, config)
    post(results)
