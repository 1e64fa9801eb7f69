"""11.4 mistake: returns the value with the lowest score (argmin), as if scores were losses."""

import math


def best_value(values, scores):
    if len(values) != len(scores) or not values or all(math.isnan(s) for s in scores):
        raise ValueError("need one score per value, not all NaN")
    finite = [i for i, s in enumerate(scores) if not math.isnan(s)]
    return values[min(finite, key=lambda i: scores[i])]


OVERRIDES = {"best_value": best_value}
LOSES = ("11.4",)
