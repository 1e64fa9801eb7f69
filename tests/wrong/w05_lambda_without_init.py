"""λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) without the + λ_init: λ starts near 0 instead of near λ_init."""

import torch


def reparameterized_lambda(lambda_q1, lambda_k1, lambda_q2, lambda_k2, lambda_init):
    dot1 = torch.sum(lambda_q1.float() * lambda_k1.float())
    dot2 = torch.sum(lambda_q2.float() * lambda_k2.float())
    return torch.exp(dot1) - torch.exp(dot2)


OVERRIDES = {"reparameterized_lambda": reparameterized_lambda}
LOSES = ("05.1",)
