"""``qbackends job run``'s inputs: the entry point, hyperparameter files, input channels, job names and folders,
checked and laid out (the job itself is not started: its own tests do that)."""

from __future__ import annotations

import json

from hypothesis import event, given
from hypothesis import strategies as st

from qbackends.errors import QBackendsError
from qbackends.hybridjob import lay_out, prepare_job, resolve_device
from qbackends.storage import exclusive_folders

from . import budget
from .sandbox import check_files, sandbox, snapshot
from .strategies import DEVICE_STRINGS, device_strings, env_text, mostly

HP_FILES = {
    "hp/good.json": json.dumps({"layers": 2, "stepsize": 0.1, "graph": {"nodes": 4}}).encode(),
    "hp/list.json": b"[1, 2]",
    "hp/deep.json": b'{"a": ' + b"[" * 200 + b"]" * 200 + b"}",
    "hp/latin.json": b'{"a": "\xe9"}',
    "hp/bom.json": b'\xef\xbb\xbf{"a": 1}',
    "hp/utf16.json": '{"a": 1}'.encode("utf-16"),
    "hp/empty.json": b"",
}
paths = st.sampled_from(
    ["mine", "mine/notes.txt", "mine/data", "mine/data/points.csv", "missing", "jobs", "jobs/old-job", ".", "results"]
)
names = mostly(
    st.sampled_from(["j1", "qaoa-18", "old-job", "a" * 50, "x-y-z"]),
    env_text | st.sampled_from(["a" * 51, "-x", "x-", "x_y", "x y", ""]),
    7,
)
channels = mostly(
    st.sampled_from(["input", "data", "in.put", "a_b"]), st.sampled_from(["", "-x", ".x", "a b", "a/b", "x" * 65]) | env_text, 8
)
items = st.tuples(channels, paths | env_text).map(lambda cp: f"{cp[0]}={cp[1]}") | st.sampled_from(["nochannel", "=mine", "x="])


@budget(120)
@given(
    mostly(
        st.sampled_from(["job.py", "pkg.mod", "pkg.mod:main", "qbackends.workloads.qaoa"]),
        st.sampled_from(["missing.py", "1bad", "a b", "m:1x", "mine", "m:"]) | env_text,
        8,
    ),
    st.none() | names,
    st.none() | st.sampled_from(sorted(HP_FILES)) | st.sampled_from(["missing.json", "mine", "mine/notes.txt"]),
    st.lists(items, max_size=3),
    mostly(st.sampled_from(["jobs", "jobs/sub", "runs"]), paths, 8),
    st.none() | mostly(st.sampled_from(["ck", "jobs/ck"]), paths, 7),
    st.none() | mostly(st.sampled_from(["res", "out/res"]), paths, 7),
)
def test_a_job_is_laid_out_in_its_own_folders_or_refused_before_anything_is_made(
    entry, name, hp, data, jobs, checkpoints, results
):
    with sandbox() as root:
        (root / "job.py").write_text("")
        for rel, content in HP_FILES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(content)
        before = snapshot(root)
        try:
            plan = prepare_job(
                entry,
                job_name=name,
                hyperparameters=hp,
                input_data=data,
                jobs_dir=jobs,
                checkpoint_dir=checkpoints,
                results_dir=results,
            )
        except QBackendsError as exc:
            event(f"refused: {exc.message[:30]}")
            assert exc.fix and "\n" not in exc.one_line(), exc.message
            check_files(root, before, [])  # nothing made
            return
        layout = plan.layout
        own = [str(layout.root), str(layout.checkpoint_dir), str(layout.results_dir)]
        try:
            with exclusive_folders(layout.held()):
                lay_out(plan)
        except QBackendsError as exc:
            event(f"not laid out: {type(exc).__name__}")
            assert exc.fix and "\n" not in exc.one_line(), exc.message
        else:
            event("laid out")
            assert json.loads(layout.hp_file.read_text()) == plan.hyperparameters
            assert sorted(p.name for p in layout.input_dir.iterdir()) == sorted(plan.channels)
        check_files(root, before, own)


@budget(60)
@given(mostly(st.sampled_from([*DEVICE_STRINGS, "auto"]), device_strings, 7))
def test_a_jobs_device_resolves_to_a_string_it_opens_with_or_is_refused(spec):
    try:
        resolved = resolve_device(spec)
    except QBackendsError as exc:
        event(f"refused: {type(exc).__name__}")
        assert exc.fix and "\n" not in exc.one_line(), exc.message
        return
    event("resolved")
    assert resolved.startswith("local:") and "/" in resolved
    assert resolve_device(resolved) == resolved  # the job's own string resolves to itself
