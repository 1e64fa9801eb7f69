"""λ_init fed a 1-based layer index: 0.8 − 0.6·exp(−0.3·(depth + 1)), so the first layer starts at 0.3555."""

import math

from diffattn.core.errors import require


def lambda_init(depth: int) -> float:
    require(depth >= 0, f"depth must be >= 0 (got {depth})")
    return 0.8 - 0.6 * math.exp(-0.3 * (depth + 1))


OVERRIDES = {"lambda_init": lambda_init}
LOSES = ("05.2",)
