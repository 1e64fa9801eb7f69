"""11.2 mistake: accepts any coefficient, so 0, 1 or 1.5 (values σ(λ) can never take) silently run."""

from diffattn.eval.lambda_sweep import _ShiftedLogits


def v2_forward(attn, x, rope, gate):
    trained = attn.lambda_proj
    if 0.0 < gate < 1.0:
        attn.lambda_proj = _ShiftedLogits(trained, constant=gate)
    try:
        return attn(x, rope)
    finally:
        attn.lambda_proj = trained


OVERRIDES = {"v2_forward": v2_forward}
LOSES = ("11.2",)
