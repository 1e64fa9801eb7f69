"""03.1 mistake: a row of zeros returns +inf (the floor is 0) instead of raising: 0/0 has no SNR."""

import math


def signal_to_noise(weights, signal_index):
    if len(weights) < 2 or not 0 <= signal_index < len(weights):
        raise ValueError("need N >= 2 and a signal position of the row")
    signal = weights[signal_index]
    noise = math.fsum(abs(w) for j, w in enumerate(weights) if j != signal_index) / (len(weights) - 1)
    if noise == 0.0:
        return -math.inf if signal < 0 else math.inf
    return signal / noise


OVERRIDES = {"signal_to_noise": signal_to_noise}
LOSES = ("03.1",)
