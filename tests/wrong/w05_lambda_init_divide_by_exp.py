"""05.2 mistake (class A, extreme but valid input): λ_init written as 0.8 − 0.6 / exp(0.3·depth).

The same number for every depth a model has, but math.exp(0.3·depth) raises OverflowError from depth 2367 on,
where the docstring's exp(−0.3·depth) just underflows to 0 and λ_init is 0.8.
"""

import math

from diffattn.core.errors import ConfigError


def lambda_init(depth):
    if depth < 0:
        raise ConfigError(f"depth must be >= 0 (got {depth})")
    return 0.8 - 0.6 / math.exp(0.3 * depth)


OVERRIDES = {"lambda_init": lambda_init}
LOSES = ("05.2",)
