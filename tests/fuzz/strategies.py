"""Inputs drawn from qbackends' own lists (device strings, settings, options), mixed with junk of every type."""

from __future__ import annotations

import string

from hypothesis import strategies as st

from qbackends.builtin import BACKENDS
from qbackends.capabilities import DIFF_METHODS

# device strings: the built-ins' and the plugins' as written, their PennyLane names, auto, and near misses
DEVICE_STRINGS = sorted(
    {b.device_string for b in BACKENDS}
    | {b.braket_string for b in BACKENDS}
    | {b.simulator for b in BACKENDS}
    | {"auto", "local:qbackends/qbackends.auto", "local:braket/braket.local.qubit", "local:qulacs/qulacs.simulator"}
)
CHEAP_DEVICES = ("local:pennylane/lightning.qubit", "local:pennylane/default.qubit", "lightning.qubit", "default.qubit")

names = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=12)
junk_text = st.text(max_size=40) | st.sampled_from(["", " ", "\x00", "ü", "../x", "a/b", "local:", "-1", "1e9", "nan", "inf"])
env_text = junk_text.filter(lambda s: "\x00" not in s)  # what an environment variable can hold
device_strings = (
    st.sampled_from(DEVICE_STRINGS)
    | st.builds(lambda p, s: f"local:{p}/{s}", names, names)
    | st.builds(
        lambda s, c: s[: len(s) // 2] + c + s[len(s) // 2 :], st.sampled_from(DEVICE_STRINGS), st.sampled_from("/ :x.Q\x00")
    )
    | junk_text
    | st.text(min_size=250, max_size=300)
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | junk_text
    | st.binary(max_size=8)
)
anything = scalars | st.lists(scalars, max_size=4) | st.dictionaries(junk_text, scalars, max_size=3)
diff_methods = st.sampled_from(DIFF_METHODS) | st.sampled_from(["adjoin", "ADJOINT", "", "parameter_shift"]) | scalars
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


def mostly(valid: st.SearchStrategy, junk: st.SearchStrategy, share: int = 8) -> st.SearchStrategy:
    """``valid`` in ``share`` of ten draws, else ``junk``: enough valid inputs to reach past the first check."""
    return st.sampled_from([True] * share + [False] * (10 - share)).flatmap(lambda ok: valid if ok else junk)
