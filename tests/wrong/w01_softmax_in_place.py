"""Stable softmax that overwrites the caller's list with the weights and returns that same list.

The numbers are right, but the logits are gone: a caller that reuses them (a λ sweep, a second map, a masked row
kept for the next step) silently computes with weights instead. The spec asks for a new list.
"""

import math


def softmax_in_place(logits):
    if not logits or any(math.isnan(z) or z == math.inf for z in logits):
        raise ValueError("need finite or -inf logits")
    top = max(logits)
    if top == -math.inf:
        raise ValueError("every position is masked")
    for i, z in enumerate(logits):
        logits[i] = math.exp(z - top)
    total = math.fsum(logits)
    for i, e in enumerate(logits):
        logits[i] = e / total
    return logits


OVERRIDES = {"softmax": softmax_in_place}
LOSES = ("01.1",)
