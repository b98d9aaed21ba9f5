"""The environment variables qbackends reads: the device, plugins, auto's exclusions, the profile, launchers'
ranks, a hybrid job's folders, the thread counts."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

from hypothesis import event, given
from hypothesis import strategies as st

from qbackends import auto, devicestring, launchers, probe
from qbackends.calibration import load_profile, profile_path
from qbackends.capabilities import kokkos_threads_problem
from qbackends.errors import DeviceStringError, EnvironmentSettingError, QBackendsError, UnknownBackendError
from qbackends.hybridjob import JobEnvironment
from qbackends.registry import build_registry, get_registry, reset_registry
from qbackends.request import DEVICE_ENV_VARS, device_string_from_env, parse_request, requested_spec
from qbackends.screening import facts_for, requested_chain

from . import budget
from .sandbox import USER_FILES, check_files, check_outcome, run, sandbox, snapshot
from .strategies import DEVICE_STRINGS, device_strings, env_text, junk_text, mostly

LAUNCHER_VARIABLES = {
    "RANK": "0",
    "WORLD_SIZE": "2",
    "LOCAL_RANK": "0",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "PMIX_NAMESPACE": "job.1",
    "PMI_RANK": "0",
    "PMI_SIZE": "2",
    "MPI_LOCALRANKID": "0",
    "MPI_LOCALNRANKS": "2",
    "SLURM_PROCID": "0",
    "SLURM_STEP_ID": "0",
    "SLURM_NTASKS": "4",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_STEP_NODELIST": "node[01-02]",
    "SLURM_JOB_ID": "77",
    "PMIX_SIZE": "2",
}
numbers = st.sampled_from(["0", "1", "2", "3", "-1", "+1", " 2", "2.0", "1e3", "65536", "99999999999999999999", "", "٣", "²"])
launcher_env = st.dictionaries(
    st.sampled_from(sorted(LAUNCHER_VARIABLES)),
    mostly(st.sampled_from(sorted(set(LAUNCHER_VARIABLES.values()))) | numbers, junk_text, 7),
    max_size=8,
)


@budget(200)
@given(launcher_env, st.integers(0, 2**22))
def test_a_launchers_variables_give_a_run_or_a_typed_error(env, parent):
    try:
        launch = launchers.from_environment(env, parent)
    except EnvironmentSettingError as exc:
        event("refused")
        assert exc.fix and "\n" not in exc.one_line() and any(name in exc.message for name in LAUNCHER_VARIABLES), exc.message
        return
    event("one process" if launch is None else launch.launcher)
    if launch is not None:
        assert 0 <= launch.rank and 1 <= launch.world and 1 <= launch.local_world and 1 <= launch.master_port <= 65535
        assert set(launch.torch_variables()) == {
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
        }
    assert probe.mpi_world_size(env) >= 1


env_devices = device_strings.filter(lambda s: "\x00" not in s)
device_env = st.dictionaries(
    st.sampled_from(DEVICE_ENV_VARS), mostly(st.sampled_from(DEVICE_STRINGS), env_devices, 6), max_size=2
)


@budget(150)
@given(
    device_env,
    st.dictionaries(
        st.just(auto.EXCLUDE_ENV), st.lists(st.sampled_from(DEVICE_STRINGS) | device_strings, max_size=3).map(",".join)
    ),
)
def test_the_device_and_exclusions_from_the_environment_parse_or_name_their_variable(env, exclude):
    text = device_string_from_env(env)
    with mock.patch.dict(os.environ, env, clear=False):
        for name in set(DEVICE_ENV_VARS) - set(env):
            os.environ.pop(name, None)
        try:
            spec = requested_spec(None)
            registry = get_registry()
            requested_chain(parse_request(None, 2), registry, facts_for(registry))
        except (DeviceStringError, UnknownBackendError) as exc:
            source = next(n for n in DEVICE_ENV_VARS if env.get(n))
            assert f"(the device string came from {source})" in exc.message, exc.message
        else:
            assert str(spec) == str(devicestring.parse(text))
    try:
        keys = auto.excluded(exclude)
    except DeviceStringError as exc:
        assert auto.EXCLUDE_ENV in exc.message, exc.message
    else:
        assert all(isinstance(k, str) and k for k in keys)


@budget(100)
@given(
    st.dictionaries(
        st.sampled_from(probe.THREAD_VARIABLES), numbers | junk_text | st.sampled_from(["4,2", "600,1", "1000"]), max_size=2
    ),
    st.integers(1, 64),
)
def test_thread_counts_are_judged_before_kokkos_starts(threads, cores):
    facts = probe.MachineFacts(host_memory_available=1 << 30, cores=cores, threads=threads)
    why, fix = kokkos_threads_problem(facts)
    assert bool(why) == bool(fix)
    if "KOKKOS_NUM_THREADS" in threads:
        value = threads["KOKKOS_NUM_THREADS"]
        digits = value.strip()
        assert not why == (digits.isascii() and digits.isdigit() and 1 <= int(digits) <= cores), (threads, why)
    elif why:
        assert int(threads["OMP_NUM_THREADS"].split(",")[0]) > cores


@budget(80)
@given(
    st.lists(st.sampled_from(["braket", "qulacs", "fixture-sampler", "pennylane", "nosuch", ""]) | junk_text, max_size=3).map(
        ",".join
    )
)
def test_a_plugin_selection_loads_what_it_names_and_says_what_it_cannot(selection):
    registry = build_registry(only=selection)
    assert "pennylane/lightning.qubit" in registry.backends  # the built-in provider always loads
    for failure in registry.failures:
        assert failure.error, failure


@budget(40)
@given(
    st.sampled_from(["profile.json", "mine", "mine/notes.txt", "", "no/such/folder/p.json", "a" * 300, "mine/data", "/dev/null"])
)
def test_a_profile_path_from_the_environment_is_read_or_ignored_never_written(path):
    with sandbox() as root, mock.patch.dict(os.environ, {"QBACKENDS_PROFILE": path}):
        before = snapshot(root)
        assert profile_path() == Path(path) or not path
        facts = facts_for(get_registry())
        assert load_profile(facts) is None  # nothing there is a profile of this machine
        check_files(root, before, [])


job_env = st.fixed_dictionaries(
    {},
    optional={
        "AMZN_BRAKET_HP_FILE": st.sampled_from(["mine/notes.txt", "hp.json", "missing.json", "mine", "", "/dev/zero"]) | env_text,
        "AMZN_BRAKET_INPUT_DIR": st.sampled_from(["mine", "missing", ""]) | env_text,
        "AMZN_BRAKET_CHECKPOINT_DIR": st.sampled_from(["ck", ""]) | env_text,
        "AMZN_BRAKET_JOB_RESULTS_DIR": st.sampled_from(["res", ""]) | env_text,
        "AMZN_BRAKET_JOB_NAME": st.sampled_from(["job-1", ""]) | env_text,
        "AMZN_BRAKET_DEVICE_ARN": st.sampled_from(DEVICE_STRINGS) | device_strings,
    },
)


@budget(80)
@given(job_env, st.sampled_from([b'{"layers": 2}', b"[1]", b"\xff", b'{"a": {"b": [1, 2]}}', b"", b"\xef\xbb\xbf{}"]))
def test_a_jobs_environment_reads_or_refuses_by_name(env, hp):
    with sandbox() as root:
        (root / "hp.json").write_bytes(hp)
        before = snapshot(root)
        try:
            job = JobEnvironment.from_env(env)
        except QBackendsError as exc:
            event(type(exc).__name__)
            assert "Hyperparameter file" in exc.message and exc.fix
        else:
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in job.hyperparameters.items())
        check_files(root, before, [])


everything = st.fixed_dictionaries(
    {},
    optional={
        "QBACKENDS_DEVICE": mostly(st.sampled_from(["lightning.qubit", "default.qubit", "auto"]), env_devices, 6),
        "AMZN_BRAKET_DEVICE_ARN": mostly(st.sampled_from(["local:pennylane/lightning.qubit"]), env_devices, 5),
        "QBACKENDS_PLUGINS": st.sampled_from(["braket", "nosuch", ""]) | env_text,
        auto.EXCLUDE_ENV: st.sampled_from(["lightning.qubit", "local:qbackends/fused.qubit,batched.qubit", "x y"]) | env_text,
        "QBACKENDS_PROFILE": st.sampled_from(["mine/notes.txt", "p.json", "mine"]),
        "OMP_NUM_THREADS": st.sampled_from(["1", "2", "1000", "abc"]),
        "KOKKOS_NUM_THREADS": st.sampled_from(["1", "abc", "0"]),
        "MASTER_PORT": numbers,
        "PMI_RANK": numbers,
        "PMI_SIZE": numbers,
        "QBACKENDS_DEBUG": st.sampled_from(["", "1"]),
    },
)


@budget(25)
@given(everything, st.sampled_from([["list"], ["probe", "lightning.qubit"], ["probe", "auto", "--wires", "3"], ["run", "qaoa"]]))
def test_commands_under_any_environment_answer_in_one_line(env, argv):
    if argv[:2] == ["run", "qaoa"]:
        argv = [*argv, "--nodes", "4", "--edges", "3", "--iterations", "1", "--quiet", "--no-plot"]
    with sandbox() as root, mock.patch.dict(os.environ, env):
        for name in set(DEVICE_ENV_VARS) - set(env):
            os.environ.pop(name, None)
        before = snapshot(root)
        reset_registry()  # QBACKENDS_PLUGINS is read as the registry is built
        try:
            outcome = run(argv)
        finally:
            reset_registry()
        event(f"{argv[0]}: exit {outcome.code}")
        check_outcome(outcome, argv)
        check_files(root, before, ["results/qaoa"])
    assert set(USER_FILES)
