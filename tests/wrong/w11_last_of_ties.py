"""11.4 mistake: `>=` in the running maximum, so of equal best scores the last value wins instead of the first."""

import math


def best_value(values, scores):
    if len(values) != len(scores) or not values or all(math.isnan(s) for s in scores):
        raise ValueError("need one score per value, not all NaN")
    best, best_score = None, -math.inf
    for value, score in zip(values, scores):
        if score >= best_score:
            best, best_score = value, score
    return best


OVERRIDES = {"best_value": best_value}
LOSES = ("11.4",)
