"""11.3 mistake (class B, lazy validation): every value is checked up front, but whether the model is a DIFF model
is found out only when the first layer is patched, inside the loop.

sweep_model(baseline_model, [], evaluate) returns [] instead of the docstring's ConfigError for a model that is not
a DIFF model; with at least one value the baseline is refused before evaluate runs.
"""

import math

from diffattn.core.errors import ConfigError
from diffattn.eval.lambda_sweep import patched


def sweep_model(model, values, evaluate):
    variant = model.config.attention
    for value in values:
        if not math.isfinite(value) or (variant == "diff_v2" and not 0.0 < value < 1.0):
            raise ConfigError(f"λ setting {value} is not allowed")
    scores = []
    for value in values:
        with patched(model, value):  # raises here for a model with no λ
            scores.append(float(evaluate(model)))
    return scores


OVERRIDES = {"sweep_model": sweep_model}
LOSES = ("11.3",)
