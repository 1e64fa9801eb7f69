"""11.3 mistake: sweeps λ_init instead of λ. Setting `attn.lambda_init = value` moves λ to value + (exp − exp) and also
rescales every head by (1 − value) instead of the trained (1 − λ_init): two changes, neither the one asked for."""

from diffattn.eval.lambda_sweep import check_value, patched


def sweep_model(model, values, evaluate):
    for value in values:
        check_value(model.config.attention, value)
    layers = [block.attn for block in model.blocks]
    scores = []
    for value in values:
        if model.config.attention == "diff_v1":
            trained = [attn.lambda_init for attn in layers]
            for attn in layers:
                attn.lambda_init = value
            try:
                scores.append(float(evaluate(model)))
            finally:
                for attn, init in zip(layers, trained):
                    attn.lambda_init = init
        else:
            with patched(model, value):
                scores.append(float(evaluate(model)))
    return scores


OVERRIDES = {"sweep_model": sweep_model}
LOSES = ("11.3",)
