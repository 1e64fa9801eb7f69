"""Subtracts the maximum correctly but never checks its input: an all-masked row comes back as NaNs.

With every logit −inf the maximum is −inf, and −inf − (−inf) is NaN, so the "weights" are [nan, nan, ...] instead of
an error; NaN and +inf logits pass through silently too. The NaNs then poison every later sum of the model.
"""

import math


def softmax_unchecked(logits):
    top = max(logits)
    exps = [math.exp(z - top) for z in logits]
    total = math.fsum(exps)
    return [e / total for e in exps]


OVERRIDES = {"softmax": softmax_unchecked}
LOSES = ("01.1",)
