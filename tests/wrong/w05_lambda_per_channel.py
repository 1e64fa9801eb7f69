"""λ without the dot-product sum: exp(λ_q1 ⊙ λ_k1) − exp(λ_q2 ⊙ λ_k2) + λ_init, one λ per channel, not per layer."""

import torch


def reparameterized_lambda(lambda_q1, lambda_k1, lambda_q2, lambda_k2, lambda_init):
    return torch.exp(lambda_q1.float() * lambda_k1.float()) - torch.exp(lambda_q2.float() * lambda_k2.float()) + lambda_init


OVERRIDES = {"reparameterized_lambda": reparameterized_lambda}
LOSES = ("05.1",)
