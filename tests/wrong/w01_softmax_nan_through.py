"""01.1 mistake: checks the maximum for NaN instead of every entry, so [1.0, nan] slips through (max ignores the NaN)."""

import math


def softmax(logits):
    if not logits:
        raise ValueError("softmax needs at least one logit")
    m = max(logits)
    if math.isnan(m) or m == math.inf or m == -math.inf:
        raise ValueError("no distribution")
    exps = [math.exp(z - m) for z in logits]
    total = math.fsum(exps)
    return [e / total for e in exps]


OVERRIDES = {"softmax": softmax}
LOSES = ("01.1",)
