"""PNG plots without a display, written atomically. Imports matplotlib only when called."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from .storage import atomic_write


def figure(width: float = 6.0, height: float = 4.0) -> tuple[Any, Any]:
    """A (figure, axes) pair on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, height))


def save_png(fig: Any, path: str | Path) -> Path:
    """Lay out, render and atomically write ``fig`` as a PNG; the figure is closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return atomic_write(path, lambda fh: fh.write(buffer.getvalue()))
