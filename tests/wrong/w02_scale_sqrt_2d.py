"""DIFF V1 maps scaled by 1/√(2d) instead of 1/√d, reading the App. G comparison Transformer's scale as DIFF's.

The paper's appendix G compares a DIFF head with a standard head of width 2d, whose scale is 1/√(2d); each DIFF map
is an ordinary softmax over d-wide queries and keys, scaled by 1/√d. Rows still sum to 1 − λ, so only a comparison
with the formula catches it.
"""

import math

from diffattn.pure.attention import diff_weights_v1


def diff_weights_v1_wrong_scale(q1, k1, q2, k2, lam, causal=False):
    shrink = 1.0 / math.sqrt(2.0)  # scaling q by 1/√2 turns the 1/√d logits into 1/√(2d) logits
    q1s = [[x * shrink for x in row] for row in q1]
    q2s = [[x * shrink for x in row] for row in q2]
    return diff_weights_v1(q1s, k1, q2s, k2, lam, causal)


OVERRIDES = {"diff_weights_v1": diff_weights_v1_wrong_scale}
LOSES = ("02.1",)
