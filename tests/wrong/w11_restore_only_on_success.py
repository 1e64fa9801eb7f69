"""11.3 mistake: restores each layer after a successful evaluation, but not in a `finally`, so an evaluation that
raises leaves the model patched."""

import torch

from diffattn.eval.lambda_sweep import _ShiftedLogits, check_value


def sweep_model(model, values, evaluate):
    for value in values:
        check_value(model.config.attention, value)
    layers = [block.attn for block in model.blocks]
    scores = []
    for value in values:
        trained = [attn.lambda_proj for attn in layers] if model.config.attention == "diff_v2" else None
        for i, attn in enumerate(layers):
            if trained is None:
                attn.lambda_full = lambda value=value: torch.tensor(float(value))
            else:
                attn.lambda_proj = _ShiftedLogits(trained[i], constant=value)
        scores.append(float(evaluate(model)))
        for i, attn in enumerate(layers):
            if trained is None:
                del attn.lambda_full
            else:
                attn.lambda_proj = trained[i]
    return scores


OVERRIDES = {"sweep_model": sweep_model}
LOSES = ("11.3",)
