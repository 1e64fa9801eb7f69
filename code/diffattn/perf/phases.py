"""FLOPs and bytes of each variant in each phase (lesson 12), from lesson 04's accounting (stdlib only, like it).

    phase     FLOPs                                           bytes (compulsory traffic, a lower bound)
    prefill   B·S · forward FLOPs per token (causal: a query    every matmul weight once + the KV cache written
              sees S/2 keys on average)                         (B·S tokens)
    train     3 × prefill (backward = 2 × forward)             40 B per parameter: fp32 weights read in the forward
                                                                and the backward, gradients written, AdamW reading
                                                                weight, gradient and two moments and writing three
    decode    B · (2N + attention over S cached keys)          every matmul weight once + each sequence's KV cache as
              (`diffattn.pure.roofline.decode_step`)            the kernel calls read it

Activations are not counted: the byte figures are lower bounds, so the intensities are upper bounds.
`diffattn.perf.counts` checks the FLOPs against PyTorch's own counter on the real modules.
"""

from __future__ import annotations

from diffattn.config import GPTConfig, accounting_model
from diffattn.core.errors import require
from diffattn.pure import accounting
from diffattn.pure.roofline import decode_step

PHASES = ("prefill", "train", "decode")
ADAMW_BYTES_PER_PARAM = 40  # fp32: 10 accesses of 4 bytes (see the module docstring)


def phase_counts(config: accounting.ModelConfig, variant: str, phase: str, batch: int, context: int,
                 bytes_per_value: int = 4, v1_kernel: str = "two_call", tied_embeddings: bool = True) -> dict:
    """FLOPs, bytes and FLOPs per byte of one prefill (B sequences of `context` tokens), one training step on them,
    or one decode step (B sequences with `context` cached tokens), for `variant` built from the baseline `config`."""
    require(phase in PHASES, f"phase must be one of {', '.join(PHASES)} (got {phase!r})")
    accounting.require_counts(batch=batch, context=context, bytes_per_value=bytes_per_value)
    if phase == "decode":
        step = decode_step(config, variant, context, batch, bytes_per_value, v1_kernel)
        flops, moved = step.flops, step.bytes
    else:
        tokens = batch * context
        flops = tokens * accounting.forward_flops_per_token(config, variant, context, v1_kernel)["total"]
        cache = accounting.kv_cache_bytes_per_token(variant, config.layers, config.heads, config.head_dim,
                                                    config.kv_heads, bytes_per_value)
        moved = bytes_per_value * accounting.matmul_params(config, variant) + tokens * cache
        if phase == "train":
            params = accounting.model_params(config, variant, tied_embeddings=tied_embeddings)["total"]
            flops, moved = 3 * flops, ADAMW_BYTES_PER_PARAM * params
    return {"phase": phase, "variant": variant, "batch": batch, "context": context, "flops": flops, "bytes": moved,
            "intensity": flops / moved}


def model_phase_counts(model: GPTConfig, variant: str, phase: str, batch: int, context: int,
                       bytes_per_value: int = 4, v1_kernel: str = "two_call") -> dict:
    """`phase_counts` for the course's model `model` (the variant's GPTConfig, as `matched_configs` builds it)."""
    return phase_counts(accounting_model(model, variant), variant, phase, batch, context, bytes_per_value, v1_kernel,
                        model.tie_embeddings)
