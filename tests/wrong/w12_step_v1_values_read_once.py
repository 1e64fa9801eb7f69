"""12.1 mistake: V1's value cache counted once on the two-call path. It charges every variant the size of its KV
cache (lesson 04's kv_cache_bytes_per_token), but the official two-call kernel runs attn(q1, k1, v) and
attn(q2, k2, v): each call reads the whole 2d-wide value, so V1 reads 1.5× its cache per step (2× on four calls)."""

from diffattn.pure.accounting import DecodeStep, kv_cache_bytes_per_token, matmul_params
from diffattn.pure.roofline import decode_step as reference


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    flops = reference(config, variant, context, batch, bytes_per_value, v1_kernel).flops
    cache = kv_cache_bytes_per_token(variant, config.layers, config.heads, config.head_dim, config.kv_heads,
                                     bytes_per_value)
    return DecodeStep(flops, bytes_per_value * matmul_params(config, variant) + batch * context * cache)


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
