"""03.2 mistake: no interpolation; returns the last grid level at which the measure was still above the threshold.

The answer snaps to the grid, so it is biased low by up to one grid step (2.0 instead of 2.4 for 1 − σ/4 at 0.4).
"""


def noise_crossover(noise_levels, measure, threshold=0.5):
    previous = None
    for level in noise_levels:
        if measure(level) < threshold:
            return level if previous is None else previous
        previous = level
    return None


OVERRIDES = {"noise_crossover": noise_crossover}
LOSES = ("03.2",)
