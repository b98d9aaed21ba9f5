"""What the fuzzer found, each shrunk example as a plain test: every one ended in an untyped exception, a silent
acceptance, a second line or another run, and now answers as the boundary promises."""

from __future__ import annotations

import io
import json
import logging
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from qbackends import Backend, auto, calibration, get_device, launchers
from qbackends.errors import (
    CheckpointError,
    DeviceStringError,
    EnvironmentSettingError,
    UnsupportedOptionError,
    WorkloadInputError,
)
from qbackends.probe import MachineFacts
from qbackends.registry import build_registry
from qbackends.workloads import qaoa, qnn

from .sandbox import run
from .test_fuzz_devices import _EntryPoint, _Plugin


@pytest.mark.parametrize(
    ("record", "error"),
    [
        (
            Backend("0", None, None, ""),
            "PluginError: Plugin 'fuzzed' registered a Backend whose simulator is None; it must be a name of letters, "
            "digits, '_', '-' and '.' (the <simulator> of local:<provider>/<simulator>).",
        ),
        (
            Backend("a", "b", "default.qubit", "pennylane", state_copies=float("nan")),
            "PluginError: Plugin 'fuzzed' registered a Backend whose state_copies is nan; it must be None or a positive, "
            "finite number.",
        ),
        (
            Backend("a", "b", "default.qubit", "pennylane", options=["shots"]),  # unhashable: every cache keyed by it broke
            "PluginError: Plugin 'fuzzed' registered a Backend whose options is ['shots']; it must be None or a tuple of "
            "option names.",
        ),
        (
            Backend("qbackends", "auto", "default.qubit", "pennylane"),
            "PluginError: Plugin 'fuzzed' registered a Backend named 'local:qbackends/auto', which is auto's own name.",
        ),
    ],
)
def test_a_backend_record_a_plugin_gets_wrong_is_that_plugins_error(record, error):
    installed = list(metadata.entry_points(group="qbackends"))
    registry = build_registry([*installed, _EntryPoint(_Plugin([record]))])
    assert [f.error for f in registry.failures if f.plugin == "fuzzed"] == [
        error + " Fix: fix that field of the plugin's Backend(...); it is left out."
    ]
    assert "pennylane/lightning.qubit" in registry.backends


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"shots": 0}, "shots=0 is not a number of shots."),  # auto took it, then the first circuit raised ValueError
        ({"shots": 2**70}, "shots=1180591620717411303424 asks for more than 100000000 shots."),
        ({"shots": []}, "shots=[] holds no shots."),
        ({"expected_steps": 0}, "expected_steps=0 is not a number of steps; auto spreads one-time costs over them."),
        ({"exclude": 3}, "exclude=3 is not a list of device strings."),
        ({"fallback": ["auto"]}, "fallback=['auto'] names auto, which is no one backend to fall back on."),
    ],
)
def test_options_auto_once_took_and_failed_on_later_are_refused_at_get_device(options, message):
    spec = "lightning.qubit" if "fallback" in options else "auto"
    with pytest.raises(UnsupportedOptionError) as err:
        get_device(spec, wires=1, **options)
    assert err.value.message == message and err.value.fix


def test_a_launcher_variable_left_unset_beside_its_companions_is_said_so():
    with pytest.raises(EnvironmentSettingError) as err:
        launchers.from_environment({"OMPI_COMM_WORLD_RANK": "0"})
    assert err.value.message == (
        "OMPI_COMM_WORLD_SIZE is not set, though variables a launcher sets with it are; a launcher sets them all together."
    )
    with pytest.raises(EnvironmentSettingError, match=r"^PMI_SIZE='²' is not a whole number"):  # int('²') raised ValueError
        launchers.from_environment({"PMI_RANK": "0", "PMI_SIZE": "²"})


def test_a_bad_exclusion_names_the_variable_it_came_from():
    with pytest.raises(DeviceStringError) as err:
        auto.excluded({auto.EXCLUDE_ENV: ":"})
    assert err.value.message.endswith("(in QBACKENDS_AUTO_EXCLUDE).")


def test_a_profile_path_that_names_no_file_is_warned_of_not_raised(caplog):
    facts = MachineFacts(host_memory_available=1 << 30, cores=2)
    with caplog.at_level(logging.WARNING, logger="qbackends"):
        assert calibration.load_profile(facts, Path("a" * 300)) is None  # OSError: File name too long
    assert "File name too long" in caplog.text and "set QBACKENDS_PROFILE to a file's path" in caplog.text


QAOA_RUN = qaoa.Config(nodes=4, edges=4, layers=1, iterations=3, seed=5)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p["optimizer"].update(step=-2), "its optimizer took -2 steps in 2 iterations"),  # math domain error
        (lambda p: p["optimizer"].update(step=None), "its optimizer took None steps in 2 iterations"),  # TypeError
        (lambda p: p["optimizer"]["v"].append(0.1), "its optimizer holds 3 v moments, not 2"),  # cannot reshape
        (lambda p: p["optimizer"]["v"].__setitem__(0, -1.0), "a second moment of its optimizer is negative"),
        (lambda p: p["optimizer"]["v"].__setitem__(0, None), "a parameter, cost or optimizer moment is not finite"),
        (lambda p: p["costs"].__setitem__(0, 10**400), "a value is not a number (or is beyond what a float holds)"),
        (
            lambda p: p["params"][0].__setitem__(0, p["params"][0][0] + 1),
            "its progress is not what was saved",
        ),  # resumed as another run
    ],
)
def test_an_edited_qaoa_checkpoint_is_refused_not_resumed_as_another_run(tmp_path, edit, message):
    qaoa.run(qaoa.Config(**{**QAOA_RUN.__dict__, "iterations": 2}), "default.qubit", checkpoint_dir=tmp_path)
    path = tmp_path / qaoa.CHECKPOINT_FILE
    state = json.loads(path.read_text())
    edit(state["progress"])
    text = json.dumps(state)
    path.write_text(text)
    with pytest.raises(CheckpointError) as err:
        qaoa.run(QAOA_RUN, "default.qubit", checkpoint_dir=tmp_path, resume=True)
    assert message in err.value.message and path.read_text() == text


def test_an_edited_qnn_checkpoint_is_refused(tmp_path):
    import torch

    config = qnn.Config(nwires=2, ndata=12, batch_size=4, epochs=1, seed=3)
    qnn.train(config, "default.qubit", checkpoint_dir=tmp_path)
    path = tmp_path / qnn.CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)
    state["best"] = 0.99
    buffer = io.BytesIO()
    torch.save(state, buffer)
    path.write_bytes(buffer.getvalue())
    with pytest.raises(
        CheckpointError, match=r"is corrupt: its progress is not what was saved \(the file was edited or damaged\)"
    ):
        qnn.train(qnn.Config(**{**config.__dict__, "epochs": 2}), "default.qubit", checkpoint_dir=tmp_path, resume=True)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"epochs": None}, "epochs=None is not a whole number."),  # TypeError: '>=' not supported
        ({"seed": 0.0}, "seed=0.0 is not a whole number."),  # TypeError in SeedSequence
        ({"lr": "0.1"}, "lr='0.1' is not a number."),
    ],
)
def test_qnn_settings_of_the_wrong_type_are_refused_by_name(settings, message):
    with pytest.raises(WorkloadInputError) as err:
        qnn.train(qnn.Config(**{"nwires": 2, "ndata": 8, "epochs": 1, **settings}), "default.qubit")
    assert err.value.message == message


def test_a_refused_argument_is_one_line_naming_the_help_to_read():
    outcome = run(["run", "qaoa", "--nodes", "x"])
    assert outcome.code == 2 and outcome.err.splitlines() == [
        "qbackends: error: run qaoa: argument --nodes: invalid int value: 'x'. Fix: `qbackends run qaoa --help` lists "
        "what it takes."
    ]


def test_a_seal_covers_tensors_by_value():
    import torch

    from qbackends.checkpoint import seal

    assert seal({"w": torch.zeros(2)}) == seal({"w": torch.zeros(2)}) != seal({"w": torch.zeros(3)})
    assert seal({"w": np.zeros(2)}) != seal({"w": np.zeros(2, dtype=np.float32)})
    assert seal([1, 2.0]) != seal([1.0, 2.0])


def test_a_rule_whose_result_needs_itself_is_refused_as_it_runs():
    import pennylane as qml

    dev = get_device("lightning.qubit", wires=1, decompositions={"RX": lambda phi, wires: [qml.RX(phi, wires)]})

    @qml.qnode(dev)
    def circuit():
        qml.RX(0.3, 0)
        return qml.expval(qml.Z(0))

    from qbackends.errors import UnsupportedCircuitError

    with pytest.raises(UnsupportedCircuitError) as err:  # RecursionError, from deep in PennyLane's graph
        circuit()
    assert err.value.message == (
        "Lowering this circuit with its decomposition rules never ends: a rule's result needs a rule again (the rules "
        "given for RX)."
    )


def test_a_thread_count_in_digits_python_reads_and_c_does_not_is_no_count():
    from qbackends.capabilities import kokkos_threads_problem

    facts = MachineFacts(host_memory_available=1 << 30, cores=2, threads={"KOKKOS_NUM_THREADS": "²"})  # int('²') raised
    assert kokkos_threads_problem(facts)[0].startswith("KOKKOS_NUM_THREADS='²' is not a thread count from 1 to 2")
    facts = MachineFacts(host_memory_available=1 << 30, cores=2, threads={"OMP_NUM_THREADS": "٣"})  # OpenMP ignores it
    assert kokkos_threads_problem(facts) == ("", "")


def test_a_world_size_in_digits_python_reads_and_c_does_not_is_one_process():
    from qbackends.probe import mpi_world_size

    assert mpi_world_size({"OMPI_COMM_WORLD_SIZE": "²"}) == 1  # int('²') raised ValueError


def _two_parameter_jacobian(dev, diff_method, measure):
    import pennylane as qml

    @qml.qnode(dev, diff_method=diff_method)
    def circuit(x):
        qml.RX(x[0], 0)
        qml.CNOT([0, 1])
        qml.RY(x[1], 1)
        return measure()

    x = qml.numpy.array([0.3, 0.4], requires_grad=True)
    return circuit, x, qml.jacobian(lambda v: qml.math.real(circuit(v)))(x)


def test_auto_asks_a_backend_for_best_with_shots_as_pennylane_does():
    import pennylane as qml

    from qbackends import gradients

    # lightning sets "best" up as adjoint even with shots (PennyLane shifts the parameters there): auto tried it so,
    # refused lightning and default.qubit, and without fused.qubit refused the circuit
    dev = get_device("auto", wires=3, shots=100, seed=1, exclude=["local:qbackends/fused.qubit"])
    circuit, x, jacobian = _two_parameter_jacobian(dev, "best", lambda: qml.expval(qml.Z(1)))
    assert np.isfinite(jacobian).all() and dev.last_choice == "local:pennylane/lightning.qubit"
    assert not any("Finite shots are not supported" in why for d in dev.decisions for why in d.refused.values())
    tape = qml.workflow.construct_tape(circuit)(x)
    gradients.check(dev, tape, "best", "autograd", lambda *_: "")  # asked of the backend that runs it
    assert gradients.device_string(dev.backend_for(tape, "best", "autograd")) == dev.last_choice


@pytest.mark.parametrize("method", ["finite-diff", "spsa"])
def test_auto_differentiates_the_state_by_finite_differences(method):
    import pennylane as qml

    # no shift rule is needed by a numerical gradient: every backend computes it, and auto refused it on every one
    dev = get_device("auto", wires=2)
    *_, jacobian = _two_parameter_jacobian(dev, method, lambda: qml.density_matrix(wires=[0]))
    reference = qml.device("default.qubit", wires=2)
    *_, expected = _two_parameter_jacobian(reference, "backprop", lambda: qml.density_matrix(wires=[0]))
    assert jacobian.shape == expected.shape and np.isfinite(jacobian).all()
    if method == "finite-diff":
        assert np.allclose(jacobian, expected, atol=1e-5)


def test_a_replacement_that_cannot_be_formatted_is_used_or_refused_typed():
    import pennylane as qml

    from .test_fuzz_devices import Unformattable, Unprintable

    rule = Unprintable(qml.MultiRZ.compute_decomposition)  # RuntimeError from repr(options): auto keyed its decisions so
    for spec in ("auto", "lightning.qubit"):
        dev = get_device(spec, wires=2, decompositions={"MultiRZ": rule})

        @qml.qnode(dev)
        def circuit():
            qml.Hadamard(0)
            qml.MultiRZ(0.3, wires=[0, 1])
            return qml.expval(qml.X(0))

        assert abs(circuit() - np.cos(0.3)) < 1e-12
    for decompositions, message in [
        ({"MultiRZ": Unformattable()}, "decompositions value <Unformattable object that cannot be shown> is not callable."),
        (
            {Unformattable(): rule},
            "decompositions key <Unformattable object that cannot be shown> is neither an operator name nor a PennyLane "
            "operator class.",
        ),
    ]:
        with pytest.raises(UnsupportedOptionError) as err:  # RuntimeError from the message's own {value!r}
            get_device("auto", wires=2, decompositions=decompositions)
        assert err.value.message == message


@pytest.mark.parametrize("method", ["hadamard", "direct-hadamard", "reversed-direct-hadamard"])
def test_a_hadamard_test_of_the_purity_is_refused_not_zero(method):
    import pennylane as qml

    from qbackends.errors import UnsupportedCircuitError

    # PennyLane 0.45's direct Hadamard test gave 0 (backprop: -0.28), the others a TypeError or an AttributeError
    with pytest.raises(UnsupportedCircuitError, match="is a measurement of the state itself"):
        _two_parameter_jacobian(get_device("local:qbackends/fused.qubit", wires=3), method, lambda: qml.purity([0]))


SPARSE_SAMPLED = (
    "cannot sample ExpectationMP of SparseHamiltonian with shots=[5, 5]: SparseHamiltonian has no diagonalizing gates, "
    "so there are no outcomes to sample."
)


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("auto", "qbackends.auto"),
        ("local:qbackends/fused.qubit", "qbackends.fused.qubit"),
        ("lightning.qubit", "lightning.qubit"),
    ],
)
def test_a_sampled_sparse_hamiltonian_is_refused_naming_it_and_the_shots(spec, name):
    import pennylane as qml

    from qbackends import gradients
    from qbackends.errors import UnsupportedCircuitError

    # auto took fused.qubit, whose sampler raised DiagGatesUndefinedError; lightning raised TypeError as it ran;
    # default.qubit refuses it (DeviceError: not accepted with finite shots)
    matrix = qml.Hamiltonian([0.4, -0.8], [qml.X(0) @ qml.X(1), qml.Z(1)]).sparse_matrix(wire_order=[0, 1])
    dev = get_device(spec, wires=2, shots=[5, 5])

    def apply(x):
        qml.RY(x[0], 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.SparseHamiltonian(matrix, wires=[0, 1]))

    x = qml.numpy.array([0.4], requires_grad=True)
    with pytest.raises(UnsupportedCircuitError) as err:
        tape = qml.workflow.construct_tape(qml.QNode(apply, dev))(x)
        gradients.check(dev, tape, "best", "autograd", lambda *_: "")
        qml.jacobian(qml.QNode(apply, dev, diff_method="best"))(x)
    assert isinstance(err.value, qml.exceptions.DeviceError)  # what default.qubit raises for it
    assert err.value.message == f"{name} {SPARSE_SAMPLED}"
    assert err.value.fix == (
        "drop shots (shots=None) for its exact value, or measure its matrix as qml.Hermitian(matrix, wires) or as a "
        "Pauli sum (qml.pauli_decompose(matrix)), which can be sampled."
    )


def _variance_of_a_measured_value(dev, diff_method):
    import pennylane as qml

    @qml.qnode(dev, diff_method=diff_method)
    def circuit(x):
        qml.RY(x[0], 0)
        qml.CNOT([0, 1])
        qml.RX(x[1], 1)
        return qml.var(qml.measure(1))

    x = qml.numpy.array([0.4, 0.7], requires_grad=True)
    return qml.jacobian(circuit)(x)


def test_auto_differentiates_a_variance_of_a_measured_value_by_best_as_default_qubit_does():
    import pennylane as qml

    # auto took batched.qubit, whose "best" fell back to param_shift: AttributeError 'NoneType' object has no
    # attribute 'name'; default.qubit's "best" is backprop
    dev = get_device("auto", wires=3)
    jacobian = _variance_of_a_measured_value(dev, "best")
    expected = _variance_of_a_measured_value(qml.device("default.qubit", wires=3), "backprop")
    assert dev.last_choice == "local:pennylane/default.qubit"
    assert np.allclose(jacobian, expected, atol=1e-12) and np.allclose(expected, [0.10491038, 0.2090024], atol=1e-8)


MEASURED_VARIANCE = (
    "is a variance of a mid-circuit measurement's value (PennyLane 0.45's param_shift fails on it with an "
    "AttributeError, and its Hadamard tests take no variance)."
)
OWN_GRADIENT = {
    "fused.qubit": "analytic expectations of observables and variances of Pauli observables",
    "batched.qubit": "expectations and variances of Pauli observables and probabilities of wires",
}


@pytest.mark.parametrize("method", ["best", "parameter-shift"])
@pytest.mark.parametrize("name", ["fused.qubit", "batched.qubit"])
def test_a_variance_of_a_measured_value_is_refused_typed_where_no_gradient_takes_it(name, method):
    from qbackends.errors import UnsupportedCircuitError

    with pytest.raises(UnsupportedCircuitError) as err:  # the same AttributeError, from param_shift
        _variance_of_a_measured_value(get_device(f"local:qbackends/{name}", wires=3), method)
    how, wire = ("param_shift was asked for", 1)
    if method == "best":
        how, wire = (f"its adjoint pass differentiates {OWN_GRADIENT[name]} only", 2)
    assert err.value.message == (
        f"qbackends.{name} has no gradient of this circuit: {how}, and parameter-shift cannot take it: "
        f"var(MeasurementValue(wires=[{wire}])) {MEASURED_VARIANCE}"
    )  # (under "best", of the circuit as the device runs it: the measured value deferred onto wire 2)


@pytest.mark.parametrize(
    ("spec", "method"),
    [
        ("local:pennylane/lightning.qubit", "best"),
        ("local:pennylane/lightning.qubit", "parameter-shift"),
        ("local:pennylane/default.qubit", "parameter-shift"),
    ],
)
def test_a_named_device_refuses_a_shifted_gradient_of_a_measured_values_variance_typed(spec, method):
    from qbackends.errors import UnsupportedCircuitError

    # PennyLane's param_shift raised AttributeError 'NoneType' object has no attribute 'name' (lightning: under "best" too)
    with pytest.raises(UnsupportedCircuitError) as err:
        _variance_of_a_measured_value(get_device(spec, wires=3), method)
    assert err.value.message == (
        f"{spec.split('/')[-1]} has no gradient of this circuit: PennyLane would take param_shift (as diff_method='best' "
        f"does where a device has none), and parameter-shift cannot take it: var(MeasurementValue(wires=[1])) {MEASURED_VARIANCE}"
    )


# lightning implements preprocess_transforms ("best" falls to param_shift); the fixture mixed.qubit (default.mixed,
# whose "best" is backprop) the older preprocess hook
@pytest.mark.parametrize(
    ("spec", "method"), [("local:pennylane/lightning.qubit", "best"), ("local:fixture/mixed.qubit", "parameter-shift")]
)
def test_a_named_device_refuses_a_purity_gradient_it_would_get_wrong(spec, method):
    import pennylane as qml

    from qbackends.errors import UnsupportedCircuitError

    def purity(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        qml.RY(x, 1)
        return qml.purity(wires=[0])

    x = qml.numpy.array(0.4, requires_grad=True)
    dev = get_device(spec, wires=2)
    # "best" fell to param_shift, which gave 0 where backprop gives -0.3587
    with pytest.raises(UnsupportedCircuitError, match="a purity is quadratic in the state"):
        qml.grad(qml.QNode(purity, dev, diff_method=method))(x)
    expected = qml.grad(qml.QNode(purity, qml.device("default.qubit", wires=2), diff_method="backprop"))(x)
    assert np.isclose(expected, -0.35867, atol=1e-5)
    assert np.isclose(qml.QNode(purity, dev)(qml.numpy.array(0.4, requires_grad=False)), 0.924176677, atol=1e-9)


def test_a_device_without_default_rules_still_refuses_what_it_would_fail_on_untyped():
    import pennylane as qml

    from qbackends.errors import UnsupportedCircuitError

    # default_decompositions=False left the device unwrapped: lightning's TypeError as it ran
    matrix = qml.Hamiltonian([1.0], [qml.Z(0) @ qml.Z(1)]).sparse_matrix(wire_order=[0, 1])
    dev = get_device("local:pennylane/lightning.qubit", wires=2, default_decompositions=False)

    @qml.set_shots(10)
    @qml.qnode(dev)
    def circuit():
        qml.Hadamard(0)
        return qml.expval(qml.SparseHamiltonian(matrix, wires=[0, 1]))

    with pytest.raises(UnsupportedCircuitError) as err:
        circuit()
    assert err.value.message == f"lightning.qubit {SPARSE_SAMPLED}".replace("[5, 5]", "10")


def test_auto_differentiates_an_exact_sparse_hamiltonian_as_default_qubit_does_by_best():
    import pennylane as qml

    # the fuzzer's reference was default.qubit's backprop, which refuses a SparseHamiltonian (QuantumFunctionError):
    # its "best" (adjoint there) is the reference; auto computes it
    matrix = qml.Hamiltonian([0.4, -0.8], [qml.X(0) @ qml.X(1), qml.Z(1)]).sparse_matrix(wire_order=[0, 1])

    def jacobian(dev):
        @qml.qnode(dev, diff_method="best")
        def circuit(x):
            qml.RY(x[0], 0)
            qml.CNOT([0, 1])
            qml.RX(x[1], 1)
            return qml.expval(qml.SparseHamiltonian(matrix, wires=[0, 1]))

        return qml.jacobian(circuit)(qml.numpy.array([0.4, 0.7], requires_grad=True))

    expected = jacobian(qml.device("default.qubit", wires=2))
    assert np.allclose(jacobian(get_device("auto", wires=2)), expected, atol=1e-10)
    assert np.allclose(expected, [0.4 * np.cos(0.4) + 0.8 * np.sin(0.4) * np.cos(0.7), 0.8 * np.cos(0.4) * np.sin(0.7)])


def test_a_sampled_gradient_in_single_precision_is_judged_as_an_estimate():
    import pennylane as qml

    from .test_fuzz_auto_gradients import _right

    # the fuzzer held a gradient from shots=[5, 5] at precision c64 to 1e-4 of the exact one (its c64 tolerance)
    dev = get_device("auto", wires=3, precision="c64", shots=[5, 5], seed=3)

    @qml.qnode(dev, diff_method="best")
    def circuit(x):
        qml.RY(x[0], 0)
        qml.CNOT([0, 1])
        qml.RX(x[1], 1)
        return qml.expval(qml.X(0) @ qml.Z(1))

    x = qml.numpy.array([0.4, 0.7], requires_grad=True)
    jacobian = qml.jacobian(lambda v: qml.math.stack(circuit(v)))(x)
    assert jacobian.shape == (2, 2) and np.isfinite(jacobian).all()  # one estimate per entry of the shot vector
    assert _right(jacobian, None, "best", x, "c64", [5, 5])  # (any finite estimate: not compared)


@pytest.mark.parametrize("spec", ["local:braket/braket.local.qubit", "local:qbackends/fused.qubit", "auto", "default.qubit"])
def test_a_wire_labelled_none_is_refused_at_get_device(spec):
    # taken, then Braket's device and fused.qubit failed as they rotated a measurement on it: ValueError "Must specify
    # the wires that PauliZ acts on" (PennyLane reads wires=None as no wires)
    with pytest.raises(UnsupportedOptionError) as err:
        get_device(spec, wires=[None])
    assert err.value.message == (
        "wires=[None] holds the label None, which PennyLane reads as no wire where an operator is built on it."
    )
    assert err.value.fix == "label the wires with numbers or strings, e.g. wires=[0, 'a']."


def test_a_qaoa_checkpoint_whose_moments_are_numbers_not_lists_is_refused(tmp_path):
    qaoa.run(qaoa.Config(**{**QAOA_RUN.__dict__, "iterations": 2}), "default.qubit", checkpoint_dir=tmp_path)
    path = tmp_path / qaoa.CHECKPOINT_FILE
    state = json.loads(path.read_text())
    state["progress"]["optimizer"].update(m=float("nan"), v=float("nan"))  # nan + nan is a number: len() raised TypeError
    text = json.dumps(state)
    path.write_text(text)
    with pytest.raises(CheckpointError) as err:
        qaoa.run(QAOA_RUN, "default.qubit", checkpoint_dir=tmp_path, resume=True)
    assert "its optimizer's m moments are nan, not a list" in err.value.message and path.read_text() == text


def test_a_profile_extended_past_a_floats_range_predicts_no_end_not_an_overflow():
    # one size measured, 1024 wires asked: 2.0 ** 1024 raised OverflowError
    profile = calibration.Profile.from_json({"fingerprint": {}, "seconds": {"pennylane/lightning.gpu": {"0": 1.0}}})
    assert profile.predict("pennylane/lightning.gpu", 1024) == float("inf")
    profile = calibration.Profile.from_json({"fingerprint": {}, "seconds": {"a": {"1": 1.0, "2": 2.0}}})
    assert profile.predict("a", 2**40) == float("inf")


def _measured_value_circuit():
    import pennylane as qml

    def circuit(x):
        qml.RX(x[0], 0)
        qml.CNOT([0, 1])
        m = qml.measure(1)
        qml.cond(m, qml.RY)(0.8, 2)
        qml.RX(x[1], 1)
        return qml.expval(qml.Z(2)), qml.expval(m)

    return circuit


@pytest.mark.parametrize(
    "spec",
    ["auto", "local:qbackends/fused.qubit", "local:qbackends/batched.qubit", "lightning.qubit", "local:pennylane/default.qubit"],
)
def test_the_standard_hadamard_test_of_a_measured_value_is_refused_not_wrong(spec):
    import pennylane as qml

    from qbackends.errors import UnsupportedCircuitError

    circuit, x = _measured_value_circuit(), qml.numpy.array([0.3, 0.7], requires_grad=True)

    def jacobian(device, method):
        return qml.jacobian(lambda v: qml.math.hstack(qml.QNode(circuit, device, diff_method=method)(v)))(x)

    exact = jacobian(qml.device("default.qubit", wires=5), "backprop")
    assert np.allclose(exact.ravel(), [-0.04481465, 0.0, 0.14776010, 0.0], atol=1e-7)
    # PennyLane 0.45's standard Hadamard test gave [-0.0448, 0, -0.2260, -0.6154] for expval(m), on every device,
    # with no error (the fuzzer found it once it gave the auxiliary wire room)
    with pytest.raises(UnsupportedCircuitError, match=r"does not take diff_method='hadamard' for this circuit: expval\(Measure"):
        jacobian(get_device(spec, wires=5), "hadamard")
    for method in ("direct-hadamard", "parameter-shift"):
        assert np.allclose(jacobian(get_device(spec, wires=5), method), exact, atol=1e-10), method


def test_a_job_entry_point_naming_no_module_is_refused_before_the_job_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here.py").write_text("")
    outcome = run(["job", "run", "A"])  # runpy's plain ImportError in the job, then the job's failure: two lines, exit 1
    assert outcome.code == 2
    assert outcome.said == [
        "qbackends: error: entry point 'A': no module named 'A' here. Fix: run `qbackends job run` from the folder that "
        "holds the module, or install its package."
    ]
    assert not (tmp_path / "jobs").exists()


def test_a_slurm_count_of_no_task_on_this_node_is_refused():
    env = {"SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_TASKS_PER_NODE": "0"}
    with pytest.raises(EnvironmentSettingError, match=r"SLURM_STEP_TASKS_PER_NODE='0' gives node 0 no task, though this"):
        launchers.from_environment(env, 0)  # it made a launch with no process on this node


def test_a_job_entry_point_that_is_a_package_without_main_is_refused_before_the_job_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()  # a folder of the user's: a namespace package, runpy's plain ImportError before
    outcome = run(["job", "run", "mine"])
    assert outcome.code == 2
    assert outcome.said == [
        "qbackends: error: entry point 'mine' is a package with no __main__ module to run. Fix: name a module in it "
        "(mine.job), or a function (mine.job:main), or add mine/__main__.py."
    ]
    assert not (tmp_path / "jobs").exists()


@pytest.mark.parametrize(
    ("entry", "line"),
    [
        # find_spec raised ValueError for a module loaded without a spec: an internal error
        ("__main__", "entry point '__main__': no module named '__main__' here."),
        # runpy's plain ImportError (no code object), then the job's failure
        ("sys", "entry point 'sys': module 'sys' is compiled, with no Python code to run."),
    ],
)
def test_a_job_entry_point_that_cannot_run_is_one_line(tmp_path, monkeypatch, entry, line):
    monkeypatch.chdir(tmp_path)
    outcome = run(["job", "run", entry])
    assert outcome.code == 2 and len(outcome.said) == 1
    assert outcome.said[0].startswith(f"qbackends: error: {line} Fix: ")
    assert not (tmp_path / "jobs").exists()
