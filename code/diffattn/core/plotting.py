"""Shared figure helpers: headless backend, one style, reproducible PNG bytes (no timestamps or version metadata)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def new_figure(width: float = 6.4, height: float = 4.0) -> tuple[Any, Any]:
    """(fig, ax) on the Agg backend, so figures render on machines without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    ax.grid(True, alpha=0.3)
    return fig, ax


def save(fig: Any, path: Path) -> Path:
    """Write `fig` as a PNG without the Software/date metadata, then close it."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path
