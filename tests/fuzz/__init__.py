"""Property-based fuzzing of every boundary qbackends reads input at (hypothesis).

Each test draws inputs from the library's own lists (its device strings, options, settings and the CLI's
parser) mixed with junk, and holds one property: a typed error in one line (exit 2) or a valid result, never
an untyped exception, never a file changed outside the run's own folders, and a resumed run the same run or
refused. ``python -m pytest tests/fuzz`` runs the CI profile (derandomized: the same examples every run, within
two minutes); ``python -m pytest tests/fuzz -m slow`` the long one (random examples, over twenty minutes).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# The slow profile draws this many times each test's CI examples (QBACKENDS_FUZZ_FACTOR for a shorter random run).
SLOW_FACTOR = int(os.environ.get("QBACKENDS_FUZZ_FACTOR", "40"))
_COMMON = dict(
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile("qbackends-fuzz-ci", derandomize=True, database=None, **_COMMON)
settings.register_profile("qbackends-fuzz-slow", **_COMMON)
_RUN = {"slow": False}  # set once per session by conftest.py, from -m


def budget(examples: int) -> settings:
    """The settings of a fuzz test that draws ``examples`` examples in CI (SLOW_FACTOR times as many under -m slow).

    The profiles are these tests' own: other hypothesis tests keep theirs."""
    slow = _RUN["slow"]
    parent = settings.get_profile("qbackends-fuzz-slow" if slow else "qbackends-fuzz-ci")
    return settings(parent, max_examples=examples * (SLOW_FACTOR if slow else 1))
