"""CLI sub-commands for workloads and jobs. Heavy imports happen inside the handlers."""

from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    """Add ``run`` and ``job`` to the ``qbackends`` parser."""
