"""Stable-looking softmax that subtracts the minimum logit instead of the maximum.

softmax(z) = softmax(z − c) holds for any constant c, so the weights are right while the logits spread by less than
≈ 709.78; a wider spread (a masked-in outlier, a long-context logit) makes exp(z − min) overflow.
"""

import math


def softmax_minus_min(logits):
    low = min(z for z in logits if z != -math.inf)
    exps = [math.exp(z - low) for z in logits]
    total = math.fsum(exps)
    return [e / total for e in exps]


OVERRIDES = {"softmax": softmax_minus_min}
LOSES = ("01.1",)
