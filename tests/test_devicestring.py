from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qbackends
from qbackends.devicestring import DeviceSpec, parse
from qbackends.errors import DeviceStringError, QBackendsError


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("local:pennylane/lightning.gpu", DeviceSpec("pennylane", "lightning.gpu")),
        ("local:braket/braket.local.qubit", DeviceSpec("braket", "braket.local.qubit")),
        ("lightning.qubit", DeviceSpec(None, "lightning.qubit")),
        ("auto", DeviceSpec(None, "auto")),
        ("local:my_prov-1/sim_2-x.y", DeviceSpec("my_prov-1", "sim_2-x.y")),
    ],
)
def test_valid_strings(text, spec):
    assert parse(text) == spec
    assert str(parse(text)) == text


def test_bad_character_is_named_with_position():
    with pytest.raises(DeviceStringError) as err:
        parse("local:pennylane/lightning qubit")
    assert "' '" in str(err.value) and "position 25" in str(err.value)
    assert "local:<provider>/<simulator>" in err.value.fix


def test_path_like_string_is_refused_not_opened():
    with pytest.raises(DeviceStringError) as err:
        parse("local:pennylane/../../etc/passwd")
    assert "'/'" in str(err.value) and "position 18" in str(err.value)


def test_too_long():
    with pytest.raises(DeviceStringError, match="257 characters long; at most 256"):
        parse("a" * 257)
    assert parse("a" * 256).simulator == "a" * 256


def test_missing_parts_and_empty():
    for text in ("local:", "local:pennylane", "local:/x", "local:x/", ""):
        with pytest.raises(DeviceStringError):
            parse(text)


def test_remote_arn_is_explained():
    with pytest.raises(DeviceStringError, match="remote Amazon Braket device ARN"):
        parse("arn:aws:braket:::device/quantum-simulator/amazon/sv1")


def test_non_string():
    with pytest.raises(DeviceStringError, match="must be a str, got int"):
        parse(42)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_parse_only_typed_errors(text):
    try:
        spec = parse(text)
    except DeviceStringError:
        return
    assert str(spec) == text


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=80), st.text(alphabet="local:/pennylanegpuqbit.-_x", max_size=60)))
def test_fuzz_choose_only_typed_errors(text):
    try:
        choice = qbackends.choose(text, 4)
    except QBackendsError:
        return
    assert choice.backend.key in qbackends.get_registry().backends
