"""The stdlib track: everything here runs on a bare Python 3 with no installs.

A test (`tests/test_pure_stdlib_only.py`) imports this package with every third-party module blocked. Matrices are
lists of rows (`list[list[float]]`); vectors are `list[float]`. The PyTorch mirror of each function has the same name
in `diffattn.nn.functional`.

Lesson map: 01 -> softmax.py, 02 -> attention.py, 03 -> snr.py, 04 -> accounting.py.
"""

from diffattn.pure.attention import (
    attention_weights,
    diff_attention_v1,
    diff_attention_v2,
    diff_weights_v1,
    diff_weights_v2,
    lambda_init,
    logit_difference_weights,
    scaled_dot_product_attention,
    sigmoid,
)
from diffattn.pure.matrix import dot, matmul, transpose
from diffattn.pure.softmax import softmax

__all__ = [
    "attention_weights",
    "diff_attention_v1",
    "diff_attention_v2",
    "diff_weights_v1",
    "diff_weights_v2",
    "dot",
    "lambda_init",
    "logit_difference_weights",
    "matmul",
    "scaled_dot_product_attention",
    "sigmoid",
    "softmax",
    "transpose",
]
