"""SNR that returns +inf whenever the noise floor is exactly zero, whatever the signal's sign.

A DIFF row can put a negative weight on the signal (λ·a2_s > a1_s): the output then holds −v_s, and the measure
must say so (−inf), not report a perfect signal.
"""

import math


def signal_to_noise_unsigned_infinity(weights, signal_index):
    if len(weights) < 2 or not 0 <= signal_index < len(weights):
        raise ValueError("need N >= 2 and 0 <= s < N")
    noise = math.fsum(abs(w) for j, w in enumerate(weights) if j != signal_index) / (len(weights) - 1)
    if noise == 0.0:
        return math.inf
    return weights[signal_index] / noise


OVERRIDES = {"signal_to_noise": signal_to_noise_unsigned_infinity}
LOSES = ("03.1",)
