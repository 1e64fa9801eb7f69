"""12.1 mistake (class A, extreme but valid sizes): V1's halved head counts taken as heads / 2 (a float), so every
count after them is a float, converted back with int() at the end. Exact below 2^53; at 2^40 cached tokens and
batch 2^20 the float has already rounded the count."""

from diffattn.pure.accounting import DecodeStep, matmul_params
from diffattn.pure.roofline import decode_step as reference


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    step = reference(config, variant, context, batch, bytes_per_value, v1_kernel)  # validates, and the other variants
    if variant != "diff_v1":
        return step
    d, pairs, kv_pairs = config.head_dim, config.heads / 2, config.kv_heads / 2
    calls = 2 if v1_kernel == "two_call" else 4
    value_width = 2 * d if v1_kernel == "two_call" else d
    attention = calls * 2 * pairs * (d + value_width) * context
    reads = calls * kv_pairs * (d + value_width) * bytes_per_value
    weights = matmul_params(config, variant)
    return DecodeStep(int(batch * (2 * weights + config.layers * attention)),
                      int(bytes_per_value * weights + batch * config.layers * context * reads))


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
