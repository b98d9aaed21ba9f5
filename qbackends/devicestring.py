"""Parse device strings: ``local:<provider>/<simulator>``, a bare simulator name, or ``auto``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import DeviceStringError

MAX_LENGTH = 256
AUTO = "auto"
AUTO_DEVICE = "qbackends.auto"  # the per-circuit auto device's PennyLane name
AUTO_STRING = f"local:qbackends/{AUTO_DEVICE}"  # what a hybrid job is given for auto: opens with qml.device(s.split("/")[-1])
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_BAD_CHAR = re.compile(r"[^A-Za-z0-9_.\-]")
_FORM = "local:<provider>/<simulator> (e.g. local:pennylane/lightning.qubit), a bare simulator name, or auto"


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device string.

    Attributes:
        provider: the provider, or None when the string named only a simulator (or ``auto``).
        simulator: the simulator name, or ``"auto"``.
    """

    provider: str | None
    simulator: str

    @property
    def is_auto(self) -> bool:
        return self.simulator in (AUTO, AUTO_DEVICE) and self.provider in (None, "qbackends")

    def __str__(self) -> str:
        if self.provider is None:
            return self.simulator
        return f"local:{self.provider}/{self.simulator}"


def parse(text: object) -> DeviceSpec:
    """Parse a device string.

    Raises:
        DeviceStringError: naming the offending character and its position, or the length.
    """
    if not isinstance(text, str):
        raise DeviceStringError(
            f"Device string must be a str, got {type(text).__name__} {text!r:.60}.",
            f"pass a string of the form {_FORM}.",
        )
    if len(text) > MAX_LENGTH:
        raise DeviceStringError(
            f"Device string is {len(text)} characters long; at most {MAX_LENGTH} are allowed.",
            f"use a string of the form {_FORM}.",
        )
    if not text:
        raise DeviceStringError("Device string is empty.", f"use a string of the form {_FORM}.")
    if text.startswith("arn:"):
        raise DeviceStringError(
            f"Device string {text!r} is a remote Amazon Braket device ARN; qbackends runs local simulators.",
            "use local:<provider>/<simulator>, e.g. local:pennylane/lightning.qubit or local:braket/braket.local.qubit.",
        )
    if text.startswith("local:"):
        body = text[len("local:") :]
        provider, slash, simulator = body.partition("/")
        if not slash or not provider or not simulator:
            raise DeviceStringError(
                f"Device string {text!r} must have a provider and a simulator separated by '/'.",
                f"use {_FORM}.",
            )
        _check_chars(text, provider, len("local:"))
        _check_chars(text, simulator, len("local:") + len(provider) + 1)
        return DeviceSpec(provider, simulator)
    _check_chars(text, text, 0)
    return DeviceSpec(None, text)


def _check_chars(whole: str, part: str, offset: int) -> None:
    bad = _BAD_CHAR.search(part)
    if bad is not None:
        position = offset + bad.start()
        raise DeviceStringError(
            f"Device string {whole!r} has the character {bad.group()!r} at position {position}; "
            "only letters, digits, '_', '-' and '.' may name a provider or simulator.",
            f"use {_FORM}.",
        )
    assert _NAME.fullmatch(part)
