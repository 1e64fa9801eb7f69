"""03.3 mistake (class B, lazy validation): lambda_sweep compares the two rows' lengths inside the per-λ loop (where
it subtracts the maps), so with an empty λ list nothing is checked.

lambda_sweep([1.0, 0.0, 0.0], [0.0, 0.0], 0, []) returns [] instead of the docstring's ValueError for z1 and z2 of
different lengths; with any λ in the list the mismatch is refused.
"""

from diffattn.pure.snr import signal_to_noise
from diffattn.pure.softmax import softmax


def lambda_sweep(z1, z2, signal_index, lambdas):
    a1, a2 = softmax(z1), softmax(z2)  # each softmax once, as the docstring asks
    snrs = []
    for lam in lambdas:
        if len(a1) != len(a2):
            raise ValueError("z1 and z2 must have the same length")
        snrs.append(signal_to_noise([x - lam * y for x, y in zip(a1, a2)], signal_index))
    return snrs


OVERRIDES = {"lambda_sweep": lambda_sweep}
LOSES = ("03.3",)
