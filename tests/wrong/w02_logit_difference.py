"""A common misreading of "differential attention": subtract the logits, then take ONE softmax, softmax((z1 − λ·z2)/√d).

Its rows sum to 1 and it has no negative weights: it is an ordinary attention map with different logits, so it
cannot cancel a noise floor. DIFF softmaxes each map first and subtracts the maps (rows sum to 1 − λ).
"""

from diffattn.pure.attention import logit_difference_weights

OVERRIDES = {"diff_weights_v1": logit_difference_weights}
LOSES = ("02.1",)
