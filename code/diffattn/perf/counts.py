"""Our FLOP counts (lesson 04's accounting, `diffattn.perf.phases`) against PyTorch's own counter (lesson 12).

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
from fractions import Fraction

import torch

from diffattn.pure import variants as registry
from diffattn.config import GPTConfig, accounting_model, matched_config
from diffattn.model.gpt import GPT
from diffattn.pure.variants import VARIANTS
from diffattn.nn.diff_v1_kernel import fuses, scored_pairs
from diffattn.nn.kernels import value_slices
from diffattn.pure import accounting


def v1_kernel_path(device: torch.device, dtype: torch.dtype = torch.float32, backend: str = "auto",
                   queries: int = 1) -> str:
    """Which V1 path our kernels run here for `queries` new positions (1: a decode step): "fused" where
    diff_v1_kernel combines the maps (CPU training and prefill), "four_call" where the backend splits the 2d-wide
    values into two d-wide calls (SDPA on a CPU, flash-attn), else "two_call"."""
    q = torch.zeros(1, queries, 2, 8, device=device, dtype=dtype)
    k, v = torch.zeros(1, queries, 2, 8, device=device, dtype=dtype), torch.zeros(1, queries, 1, 16, device=device,
                                                                                  dtype=dtype)
    if fuses(q, k, v, backend):
        return "fused"
    return "four_call" if value_slices(q[:, :, :1], k[:, :, :1], v, backend) == 2 else "two_call"


def fused_scored_fraction(seq: int, group: int) -> Fraction:
    """The share of the whole seq × seq map that diff_v1_kernel scores for `group` query heads per KV head (1 while
    one block holds all of seq)."""
    return Fraction(scored_pairs(seq, seq, group), seq * seq)


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
    runs the attention as matmuls over the whole map; SDPA on a CPU is one fused op the counter may not know; V1's
    fused CPU kernel runs matmuls over whole query blocks (`fused_scored_fraction` of the map).
    The backward is counted too: 2 × the forward for every matmul, except in V1's fused kernel, whose backward also
    recomputes both maps' scores (2.5 × its attention forward).
    """
    rows = []
    tokens = torch.randint(0, base.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    for backend in backends:
        for variant in variants:
            model_config = dataclasses.replace(matched_config(base, variant), backend=backend)
            torch.manual_seed(0)
            model = GPT(model_config)
            config = accounting_model(model_config, variant)
            kernel = "two_call" if backend == "math" else v1_kernel_path(torch.device("cpu"), backend=backend,
                                                                         queries=seq)
            per_token = accounting.forward_flops_per_token(config, variant, seq, kernel)
            projections, attention = batch * seq * per_token["projections"], batch * seq * per_token["attention_core"]
            sees_attention = backend == "math" or cpu_fused_sdpa_counted()
            if kernel == "fused" and kernel in registry.get(variant).base.kernels:  # plain aten ops the counter sees
                sees_attention = True
                attention = int(attention * fused_scored_fraction(seq, config.heads // config.kv_heads))
            forward = _op_counts(model, tokens, backward=False)
            both = _op_counts(model, tokens, backward=True)
            rows.append({"variant": variant, "backend": backend, "batch": batch, "seq": seq, "v1_kernel": kernel,
                         "ours_projections": projections, "ours_attention_causal": attention,
                         "expected": projections + (2 * attention if sees_attention else 0),
                         "counted": sum(forward.values()), "counted_by_op": forward,
                         "counted_forward_backward": sum(both.values())})
    return rows
