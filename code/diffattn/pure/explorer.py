"""The explorer page's reference values: lesson 03's model at a grid of settings, for the page to reproduce.

`site/explorer.html` re-implements diffattn.pure's softmax, snr and trials in JavaScript, name for name, down to
CPython's Mersenne Twister, `random.gauss` and `math.fsum`, so its draws are `trials.draws`'s draws. This module
computes `trials.try_setting` (what `diffattn snr` prints) at GRID and writes the results into the page:
the page recomputes each setting on load and shows the largest difference; the browser tests
(tests/test_site_browser.py) require it to be at most 1e-9. Stdlib only, like the rest of diffattn.pure.

    python -m diffattn.pure.explorer OUT.html   # site/explorer.html with the reference grid embedded
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from diffattn.core.errors import require
from diffattn.pure.trials import LAMBDA, MU, N, NOISE_STD, try_setting

TRIALS = 16  # `diffattn snr`'s default, and the page's
N_MAX = 16_384  # the page's cap on N: 16 trials redrawn in well under a second while a slider moves
RHO = 0.9
DEFAULT = {"n": N, "mu": MU, "noise_std": NOISE_STD, "rho": RHO, "lam": LAMBDA, "variant": "v1"}
# One knob moved at a time from lesson 03's setting (25 settings); N stays ≤ 4,096 so the grid takes seconds in CPython.
GRID = [DEFAULT] + [
    {**DEFAULT, name: value}
    for name, values in (
        ("n", (2, 16, 256, 4096)),
        ("mu", (-3.0, 0.0, 4.0, 12.0)),
        ("noise_std", (0.0, 0.5, 3.0)),
        ("rho", (-1.0, 0.0, 0.5, 1.0)),
        ("lam", (-0.5, 0.0, 0.5, 1.0, 1.5)),
    )
    for value in values
] + [{**DEFAULT, "variant": "v2", "lam": lam} for lam in (0.1, 0.5, 0.8, 0.95)]
PLACEHOLDER = '<script id="reference-grid" type="application/json">null</script>'
PAGE = Path(__file__).resolve().parents[3] / "site" / "explorer.html"


def reference_grid(settings: list[dict[str, Any]] = GRID) -> list[dict[str, Any]]:
    """try_setting at each setting, TRIALS trials: the numbers the page must reproduce."""
    return [try_setting(trials=TRIALS, **setting) for setting in settings]


def embed(page: str, grid: list[dict[str, Any]]) -> str:
    """The page with `grid` in its reference-grid script element (JSON; '</' escaped so it cannot close the tag)."""
    require(page.count(PLACEHOLDER) == 1, f"the page must contain {PLACEHOLDER!r} exactly once")
    data = json.dumps(grid, separators=(",", ":")).replace("</", "<\\/")
    return page.replace(PLACEHOLDER, PLACEHOLDER.replace(">null<", f">{data}<"))


def write_page(out: Path, source: Path = PAGE) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(embed(source.read_text(encoding="utf-8"), reference_grid()), encoding="utf-8")
    return out


if __name__ == "__main__":
    require(len(sys.argv) == 2, "usage: python -m diffattn.pure.explorer OUT.html")
    print(write_page(Path(sys.argv[1])))
