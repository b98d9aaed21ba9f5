"""Fuzz profiles: CI (the default: bounded, derandomized, no example database) or slow (under ``-m slow``)."""

from __future__ import annotations

import pytest

from . import _RUN


def pytest_configure(config):
    _RUN["slow"] = "slow" in (config.getoption("-m") or "")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under ``-m slow`` the fuzz tests are the long run: marked slow, so that ``-m slow`` selects them."""
    if _RUN["slow"]:
        for item in items:
            if "/fuzz/" in f"/{item.nodeid}":
                item.add_marker(pytest.mark.slow)
