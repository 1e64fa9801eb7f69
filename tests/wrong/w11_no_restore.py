"""11.3 mistake: patches each layer and never restores it, so after the sweep the model keeps the last setting."""

import torch

from diffattn.eval.lambda_sweep import _ShiftedLogits, check_value


def sweep_model(model, values, evaluate):
    for value in values:
        check_value(model.config.attention, value)
    scores = []
    for value in values:
        for block in model.blocks:
            attn = block.attn
            if model.config.attention == "diff_v1":
                attn.lambda_full = lambda value=value: torch.tensor(float(value))
            else:
                attn.lambda_proj = _ShiftedLogits(getattr(attn.lambda_proj, "trained", attn.lambda_proj), constant=value)
        scores.append(float(evaluate(model)))
    return scores


OVERRIDES = {"sweep_model": sweep_model}
LOSES = ("11.3",)
