"""λ computed in the vectors' own dtype (bf16 in a bf16 model) and only cast to fp32 at the end."""

import torch


def reparameterized_lambda(lambda_q1, lambda_k1, lambda_q2, lambda_k2, lambda_init):
    low = torch.bfloat16
    dot1 = torch.sum(lambda_q1.to(low) * lambda_k1.to(low))
    dot2 = torch.sum(lambda_q2.to(low) * lambda_k2.to(low))
    return (torch.exp(dot1) - torch.exp(dot2) + lambda_init).float()


OVERRIDES = {"reparameterized_lambda": reparameterized_lambda}
LOSES = ("05.1",)
