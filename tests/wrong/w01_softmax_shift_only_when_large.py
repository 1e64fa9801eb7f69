"""01.1 mistake (class A, extreme but valid input): subtracts the maximum only when some logit is beyond exp's range
(|max| > 700), to save the subtraction on "ordinary" rows.

Every single exp(z) is then finite, but their SUM is not: a row of 20,000 logits equal to 700 has exp(700) ≈ 1e304
per entry and a sum of ≈ 2e308 = inf, so every weight comes back 0.0 (the docstring's softmax is 1/20,000 each).
Rows with a large maximum, tiny rows and short rows all work.
"""

import math


def softmax(logits):
    row = list(logits)
    if not row:
        raise ValueError("softmax needs at least one logit")
    if any(math.isnan(z) or z == math.inf for z in row):
        raise ValueError("logits must be finite or -inf")
    top = max(row)
    if top == -math.inf:
        raise ValueError("every logit is masked")
    shift = top if abs(top) > 700 else 0.0  # exp overflows above ~709.78 and underflows below ~-745
    exps = [math.exp(z - shift) for z in row]
    total = sum(exps)
    return [e / total for e in exps]


OVERRIDES = {"softmax": softmax}
LOSES = ("01.1",)
