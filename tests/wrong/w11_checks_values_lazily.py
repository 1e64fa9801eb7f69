"""11.3 mistake: checks each value only when its turn comes, so a bad value at the end of the list is found after the
earlier settings were already evaluated (minutes of work on a real model, and a half-finished sweep)."""

from diffattn.eval.lambda_sweep import patched


def sweep_model(model, values, evaluate):
    scores = []
    for value in values:
        with patched(model, value):
            scores.append(float(evaluate(model)))
    return scores


OVERRIDES = {"sweep_model": sweep_model}
LOSES = ("11.3",)
