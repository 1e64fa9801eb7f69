"""11.3 mistake: patches only the first attention layer (`model.blocks[0].attn`); the deeper layers keep their trained λ."""

import contextlib

from diffattn.eval.lambda_sweep import _patch_v1, _patch_v2, check_value


def sweep_model(model, values, evaluate):
    for value in values:
        check_value(model.config.attention, value)
    patch = _patch_v1 if model.config.attention == "diff_v1" else _patch_v2
    scores = []
    for value in values:
        with patch(model.blocks[0].attn, value, "fixed"):
            scores.append(float(evaluate(model)))
    return scores


OVERRIDES = {"sweep_model": sweep_model}
LOSES = ("11.3",)
