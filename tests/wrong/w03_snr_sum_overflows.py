"""03.1 mistake (class A, extreme but valid input): the noise floor as sum(|w_j|) / (N − 1), summed first.

The docstring accepts any weights (SNR is scale-free), but for a row like [1e308, 1e308, 1e308] the sum of the
noise magnitudes overflows to inf and the SNR comes back 0.0 instead of 1.0. (The reference's fsum raises
OverflowError on that row: a test for it needs the reference fixed too.)
"""

import math


def signal_to_noise(weights, signal_index):
    n = len(weights)
    if n < 2 or not 0 <= signal_index < n:
        raise ValueError("need N >= 2 and a signal position 0 <= s < N")
    signal = weights[signal_index]
    total = sum(abs(w) for j, w in enumerate(weights) if j != signal_index)
    noise = total / (n - 1)
    if noise == 0.0:
        if signal == 0.0:
            raise ValueError("every weight is 0: SNR undefined")
        return math.copysign(math.inf, signal)
    return signal / noise


OVERRIDES = {"signal_to_noise": signal_to_noise}
LOSES = ("03.1",)
