"""03.2 mistake: no interpolation; returns the first grid level at which the measure is below the threshold.

Biased high by up to one grid step (2.5 instead of 2.4 for 1 − σ/4 at 0.4); it also measures nothing past the crossing,
so only the value, not the evaluation order, gives it away.
"""


def noise_crossover(noise_levels, measure, threshold=0.5):
    for level in noise_levels:
        if measure(level) < threshold:
            return level
    return None


OVERRIDES = {"noise_crossover": noise_crossover}
LOSES = ("03.2",)
