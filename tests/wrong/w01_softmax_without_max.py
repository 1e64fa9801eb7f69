"""Softmax straight from the formula, exp(z_i) / Σ_j exp(z_j), without subtracting the maximum first.

Right on moderate logits; raises OverflowError for a logit above ≈ 709.78 and ZeroDivisionError when every logit
is below ≈ −745 (all the exponentials underflow to 0.0). Lesson 01 shows both failures.
"""

from diffattn.lessons.lesson01_noise_floor import naive_softmax

OVERRIDES = {"softmax": naive_softmax}
LOSES = ("01.1",)
