"""03.1 mistake: the floor averages |w_j| over every position, the signal's own weight included.

The signal then inflates its own noise floor: on a short row, or one where the signal holds most of the mass, the SNR
comes out far too small (a row with half its mass on the signal and three noise weights of 0.25, −0.25, 0 gives 2,
not 3).
"""


def signal_to_noise(weights, signal_index):
    return weights[signal_index] / (sum(abs(w) for w in weights) / len(weights))


OVERRIDES = {"signal_to_noise": signal_to_noise}
LOSES = ("03.1",)
