"""qbackends' pytest plugin (entry point ``pytest11``), loaded wherever qbackends is installed.

Fixtures for testing a plugin: ``qbackends_registry`` builds the registry afresh for the test (no
device-selection environment, no calibration profile), ``check_backend`` is
``qbackends.testing.check_backend`` on that registry.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def qbackends_registry(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A registry built afresh from the installed entry points, and discarded after the test."""
    from . import registry

    for var in ("AMZN_BRAKET_DEVICE_ARN", "QBACKENDS_DEVICE", "QBACKENDS_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("QBACKENDS_PROFILE", str(tmp_path_factory.mktemp("qbackends-profile") / "none.json"))
    registry.reset_registry()
    yield registry.get_registry()
    registry.reset_registry()


@pytest.fixture
def check_backend(qbackends_registry: Any) -> Any:
    """``qbackends.testing.check_backend``, run against the test's fresh registry."""
    from .testing import check_backend

    return check_backend
