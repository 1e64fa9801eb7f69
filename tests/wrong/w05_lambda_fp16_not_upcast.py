"""05.1 mistake (class D, dtype order): upcasts the λ vectors only when they are bfloat16 (the "bf16 model" case
the docstring mentions), so float16 vectors are multiplied, summed and exponentiated in float16 and only the result
is cast to float32.

The docstring: "any float dtype ... computed in float32 whatever the input dtype". For float16 vectors of d = 128
with entries of order 0.3 the float16 dot products and exp are off by ~1e-3, far outside atol 1e-6; float32 and
bfloat16 vectors give the reference's λ.
"""

import torch


def reparameterized_lambda(lambda_q1, lambda_k1, lambda_q2, lambda_k2, lambda_init):
    vectors = (lambda_q1, lambda_k1, lambda_q2, lambda_k2)
    if lambda_q1.dtype == torch.bfloat16:
        vectors = tuple(t.float() for t in vectors)
    q1, k1, q2, k2 = vectors
    lam = torch.exp(torch.sum(q1 * k1)) - torch.exp(torch.sum(q2 * k2)) + lambda_init
    return lam if lam.dtype == torch.float64 else lam.float()


OVERRIDES = {"reparameterized_lambda": reparameterized_lambda}
LOSES = ("05.1",)
