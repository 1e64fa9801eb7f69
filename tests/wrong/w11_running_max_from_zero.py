"""11.4 mistake: a running maximum that starts at 0 (and the first value), so when every score is negative (−loss)
it never moves and returns the first value."""

import math


def best_value(values, scores):
    if len(values) != len(scores) or not values or all(math.isnan(s) for s in scores):
        raise ValueError("need one score per value, not all NaN")
    best, best_score = values[0], 0.0
    for value, score in zip(values, scores):
        if score > best_score:
            best, best_score = value, score
    return best


OVERRIDES = {"best_value": best_value}
LOSES = ("11.4",)
