"""03.2 mistake (class B, lazy validation): checks that the grid increases while walking it, so the check stops
where the measurement stops.

noise_crossover([0.0, 1.0, 0.5], m) with m already below the threshold at σ = 1 returns a crossing between 0 and 1
although the grid is not strictly increasing (the docstring: a ValueError). Unsorted grids are caught only when the
walk reaches the bad pair (e.g. when the measure never drops).
"""


def noise_crossover(noise_levels, measure, threshold=0.5):
    if not noise_levels:
        raise ValueError("need at least one noise level")
    previous = None
    for level in noise_levels:
        if previous is not None and not previous[0] < level:
            raise ValueError("noise levels must be strictly increasing")
        value = measure(level)
        if value < threshold:
            if previous is None:
                return level
            (p_level, p_value) = previous
            return p_level + (level - p_level) * (p_value - threshold) / (p_value - value)
        previous = (level, value)
    return None


OVERRIDES = {"noise_crossover": noise_crossover}
LOSES = ("03.2",)
