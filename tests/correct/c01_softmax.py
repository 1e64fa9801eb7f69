"""01.1, correct: softmax through the log-sum-exp, w_i = exp((z_i − m) − log Σ_j exp(z_j − m)).

How it differs from the reference (diffattn.pure.softmax): one validating pass that also finds the maximum (the
reference checks with all() and then calls max()), masked entries are never exponentiated (they are set to 0.0
directly), and each weight is one exp of a log-domain difference instead of a division by the sum.
"""

from __future__ import annotations

import math


def softmax(logits):
    values = list(logits)  # any sequence; also a private copy, so the caller's row is never touched
    if not values:
        raise ValueError("softmax needs at least one logit (got an empty row)")
    top = -math.inf
    for position, z in enumerate(values):
        if z != z or z == math.inf:
            raise ValueError(f"logit {position} is {z}: logits must be finite or -inf (masked)")
        if z > top:
            top = z
    if top == -math.inf:
        raise ValueError("every logit is -inf: an entirely masked row has no distribution")
    log_total = math.log(math.fsum(math.exp(z - top) for z in values if z != -math.inf))  # the sum is >= 1
    return [0.0 if z == -math.inf else math.exp((z - top) - log_total) for z in values]


OVERRIDES = {"softmax": softmax}
