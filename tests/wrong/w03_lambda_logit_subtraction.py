"""03.3 mistake (a common misreading): the λ sweep subtracts logits before one softmax, softmax(z1 − λ·z2).

That row is a probability distribution (non-negative, sums to 1), not A1 − λ·A2; it agrees with DIFF only at λ = 0.
"""

from diffattn.pure.snr import signal_to_noise
from diffattn.pure.softmax import softmax


def lambda_sweep(z1, z2, signal_index, lambdas):
    return [signal_to_noise(softmax([a - lam * b for a, b in zip(z1, z2)]), signal_index) for lam in lambdas]


OVERRIDES = {"lambda_sweep": lambda_sweep}
LOSES = ("03.3",)
