"""11.4 mistake (class A, extreme but valid scores): a running best that starts at (None, −inf) and moves on a
strictly larger score, with "still None" taken to mean "every score was NaN".

Right whenever some score is above −inf, but a sweep whose every setting scored −inf (−loss with an infinite loss,
which is not NaN) raises "every score is NaN" instead of returning the first value.
"""

import math

from diffattn.core.errors import ConfigError


def best_value(values, scores):
    if len(values) != len(scores) or not values:
        raise ConfigError("need one score per value")
    best, best_score = None, -math.inf
    for value, score in zip(values, scores):
        if score > best_score:  # NaN compares False: never wins
            best, best_score = value, score
    if best is None:
        raise ConfigError("every score is NaN")
    return best


OVERRIDES = {"best_value": best_value}
LOSES = ("11.4",)
