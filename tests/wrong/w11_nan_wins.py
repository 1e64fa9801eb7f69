"""11.4 mistake: `max(scores)` with a NaN first returns NaN (every comparison with NaN is False), and
`scores.index(nan)` then picks the diverged setting."""


def best_value(values, scores):
    if len(values) != len(scores) or not values:
        raise ValueError("need one score per value")
    return values[scores.index(max(scores))]


OVERRIDES = {"best_value": best_value}
LOSES = ("11.4",)
