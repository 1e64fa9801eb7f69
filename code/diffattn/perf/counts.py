"""FLOPs and bytes of each variant in each phase (lesson 12), from lesson 04's accounting, and the cross-check
against PyTorch's own counter on the real modules.

    phase     FLOPs                                           bytes (compulsory traffic, a lower bound)
    prefill   B·S · forward FLOPs per token (causal: a query    every matmul weight once + the KV cache written
              sees S/2 keys on average)                         (B·S tokens)
    train     3 × prefill (backward = 2 × forward)             40 B per parameter: fp32 weights read in the forward
                                                                and the backward, gradients written, AdamW reading
                                                                weight, gradient and two moments and writing three
    decode    B · (2N + attention over S cached keys)          every matmul weight once + each sequence's KV cache as
              (`diffattn.pure.roofline.decode_step`)            the kernel calls read it

Activations are not counted: the byte figures are lower bounds, so the intensities are upper bounds.

`torch.utils.flop_counter.FlopCounterMode` counts matmul-like aten ops. Its known differences from these counts:
- it charges attention for the whole S × S map ("We aren't accounting for causal attention", flop_counter.py), i.e.
  2 × the causal count, which is also what the math path actually executes;
- it has formulas for the CUDA SDPA kernels (flash, efficient, cuDNN) but none for the CPU's fused kernel
  (aten._scaled_dot_product_flash_attention_for_cpu in torch 2.13): with SDPA on a CPU it counts attention as 0;
- its SDPA formula accepts GQA (h_q a multiple of h_kv) only in newer versions; older ones assert h_q == h_kv.
`flop_counter_check` measures each of these on this torch instead of assuming them.
"""

from __future__ import annotations

import dataclasses

import torch

from diffattn.config import GPTConfig, accounting_model, matched_configs
from diffattn.errors import require
from diffattn.model import GPT
from diffattn.names import VARIANTS
from diffattn.nn.kernels import value_slices
from diffattn.pure import accounting
from diffattn.pure.roofline import decode_step

PHASES = ("prefill", "train", "decode")
ADAMW_BYTES_PER_PARAM = 40  # fp32: 10 accesses of 4 bytes (see the module docstring)


def v1_kernel_path(device: torch.device, dtype: torch.dtype = torch.float32, backend: str = "auto") -> str:
    """Which of V1's official paths our kernels run here: "four_call" where the backend splits the 2d-wide values
    into two d-wide calls (SDPA on a CPU, flash-attn), else "two_call"."""
    q = torch.zeros(1, 1, 2, 8, device=device, dtype=dtype)
    return "four_call" if value_slices(q, q[:, :, :1], torch.zeros(1, 1, 1, 16, device=device, dtype=dtype),
                                       backend) == 2 else "two_call"


def phase_counts(model: GPTConfig, variant: str, phase: str, batch: int, context: int, bytes_per_value: int = 4,
                 v1_kernel: str = "two_call") -> dict:
    """FLOPs, bytes and FLOPs per byte of one prefill (B sequences of `context` tokens), one training step on them,
    or one decode step (B sequences with `context` cached tokens). `model` is the variant's GPTConfig."""
    require(phase in PHASES, f"phase must be one of {', '.join(PHASES)} (got {phase!r})")
    accounting.require_counts(batch=batch, context=context, bytes_per_value=bytes_per_value)
    config = accounting_model(model, variant)
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
            params = accounting.model_params(config, variant, tied_embeddings=model.tie_embeddings)["total"]
            flops, moved = 3 * flops, ADAMW_BYTES_PER_PARAM * params
    return {"phase": phase, "variant": variant, "batch": batch, "context": context, "flops": flops, "bytes": moved,
            "intensity": flops / moved}


def _op_counts(model: GPT, tokens: torch.Tensor, backward: bool) -> dict[str, int]:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        logits = model(tokens)
        if backward:
            logits.float().sum().backward()
    return {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}


def cpu_fused_sdpa_counted() -> bool:
    """Whether this torch's FlopCounterMode has a formula for the CPU's fused SDPA kernel."""
    from torch.utils.flop_counter import flop_registry

    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    return op is not None and op in flop_registry


def flop_counter_gqa(batch: int = 1, q_heads: int = 4, kv_heads: int = 2, seq: int = 8, head_dim: int = 4) -> int | str:
    """FlopCounterMode's SDPA formula on a GQA shape: its FLOP count, or the error older versions raise."""
    from torch.utils.flop_counter import sdpa_flop_count

    try:
        return int(sdpa_flop_count((batch, q_heads, seq, head_dim), (batch, kv_heads, seq, head_dim),
                                   (batch, kv_heads, seq, head_dim)))
    except (AssertionError, ValueError, RuntimeError) as exc:
        return f"{type(exc).__name__}: {exc}"


def flop_counter_check(base: GPTConfig, batch: int, seq: int, backends: tuple[str, ...] = ("math", "sdpa"),
                       variants: tuple[str, ...] = VARIANTS) -> list[dict]:
    """Our forward counts beside FlopCounterMode's on the real modules (CPU, fp32, seeded), per variant and backend.

    expected = projections + (2 × causal attention where the counter sees the attention, else 0): the math path
    runs the attention as matmuls over the whole map; SDPA on a CPU is one fused op the counter may not know.
    The backward is counted too (it should be 2 × the forward for every matmul).
    """
    rows = []
    tokens = torch.randint(0, base.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    for backend in backends:
        for variant in variants:
            model_config = dataclasses.replace(matched_configs(base)[variant], backend=backend)
            torch.manual_seed(0)
            model = GPT(model_config)
            config = accounting_model(model_config, variant)
            kernel = "two_call" if backend == "math" else v1_kernel_path(torch.device("cpu"), backend=backend)
            per_token = accounting.forward_flops_per_token(config, variant, seq, kernel)
            projections, attention = batch * seq * per_token["projections"], batch * seq * per_token["attention_core"]
            sees_attention = backend == "math" or cpu_fused_sdpa_counted()
            forward = _op_counts(model, tokens, backward=False)
            both = _op_counts(model, tokens, backward=True)
            rows.append({"variant": variant, "backend": backend, "batch": batch, "seq": seq, "v1_kernel": kernel,
                         "ours_projections": projections, "ours_attention_causal": attention,
                         "expected": projections + (2 * attention if sees_attention else 0),
                         "counted": sum(forward.values()), "counted_by_op": forward,
                         "counted_forward_backward": sum(both.values())})
    return rows
