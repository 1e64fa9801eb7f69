"""Lesson 12: the roofline of a decode step, and the batch at which decoding stops being memory-bound (stdlib only).

One decode step at batch B, each sequence with S cached tokens, computes and moves (lesson 04's accounting):

    FLOPs = B · (2N + a(S))   2 FLOPs per matmul weight (N of them) per token, plus the attention over S keys:
                              a(S) = L · Σ_calls 2·h_q·(d_k + d_v)·S
    bytes = w·N + B · k(S)    every matmul weight once (w bytes each; the embedding table is looked up, B rows, not
                              streamed), plus each sequence's KV cache as the kernel calls read it: k(S) = L·S·(bytes
                              per cached token and layer)

On a machine with peak P FLOP/s and memory bandwidth W B/s the step takes at least max(FLOPs/P, bytes/W): the
roofline. It is compute-bound once B·(2N + a)/P ≥ (w·N + B·k)/W, i.e. from the crossover batch

    B* = (w·N / W) / ((2N + a)/P − k/W) = w·N / ((2N + a)·W/P − k),   computed in the second form (see
                                                                       roofline_crossover),

which exists only when (2N + a)/k > P/W, the ridge point: per sequence, the step must do more FLOPs per byte of its
own KV cache than the machine's ratio of compute to bandwidth. a/k is the attention's own intensity (≈ the GQA group
g for the baseline, 2g for V2) and 2N/k shrinks as S grows, so at long contexts decoding never turns compute-bound.
"""

from __future__ import annotations

from diffattn.core.errors import require
from diffattn.pure.accounting import DecodeStep, ModelConfig, decode_kv_read_bytes, kernel_calls, matmul_params, require_counts

# The V1 paths a decode step can take. Accounting's third, "fused" (diffattn.nn.diff_v1_kernel), runs only where more
# than one query is new (training, prefill): a decode step has one, and keeps the two- or four-call SDPA path.
DECODE_V1_KERNELS = ("two_call", "four_call")


def _require_machine(peak_flops: float, bandwidth: float) -> None:
    for name, value in (("peak_flops", peak_flops), ("bandwidth", bandwidth)):
        require(isinstance(value, (int, float)) and 0 < value < float("inf"),
                f"{name} must be a positive finite number (got {value!r})")


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """P / W, FLOPs per byte: a kernel below it is bandwidth-bound on this machine, above it compute-bound."""
    _require_machine(peak_flops, bandwidth)
    return peak_flops / bandwidth


def attention_decode_flops(variant: str, heads: int, head_dim: int, context: int, kv_heads: int | None = None,
                           v1_kernel: str = "two_call") -> int:
    """One layer, one new token: every query head of every kernel call scores `context` keys and sums their values,
    2·(d_k + d_v) FLOPs per key (no causal halving: the new token sees the whole cache)."""
    require_counts(context=context)
    calls = kernel_calls(variant, heads, head_dim, kv_heads, v1_kernel)
    return sum(2 * call.query_heads * (call.key_width + call.value_width) for call in calls) * context


def decode_step(config: ModelConfig, variant: str, context: int, batch: int, bytes_per_value: int = 2,
                v1_kernel: str = "two_call") -> DecodeStep:
    """The FLOPs and bytes of one decode step of `batch` sequences with `context` cached tokens each (exercise 12.1).
    `v1_kernel` is one of DECODE_V1_KERNELS for every variant: no decode step runs the fused kernel."""
    require(v1_kernel in DECODE_V1_KERNELS, f"v1_kernel must be one of {', '.join(DECODE_V1_KERNELS)} for a decode "
                                            f"step (got {v1_kernel!r}; the fused V1 kernel runs only where several "
                                            f"queries are new: training and prefill)")
    require_counts(batch=batch)  # context and bytes_per_value: checked by the two counts below
    weights = matmul_params(config, variant)
    attention = config.layers * attention_decode_flops(variant, config.heads, config.head_dim, context,
                                                       config.kv_heads, v1_kernel)
    cache = config.layers * context * decode_kv_read_bytes(variant, config.heads, config.head_dim, config.kv_heads,
                                                           bytes_per_value, v1_kernel)
    return DecodeStep(batch * (2 * weights + attention), bytes_per_value * weights + batch * cache)


def step_seconds(step: DecodeStep, peak_flops: float, bandwidth: float) -> float:
    """The roofline's lower bound on the step's time: whichever of compute and memory takes longer."""
    _require_machine(peak_flops, bandwidth)
    return max(step.flops / peak_flops, step.bytes / bandwidth)


def roofline_crossover(weight_bytes: int, flops_per_sequence: int, bytes_per_sequence: int, peak_flops: float,
                       bandwidth: float) -> float | None:
    """B*, where a step of B sequences, B·f/P seconds of compute against (w + B·k)/W of memory, turns compute-bound;
    None when no batch does (exercise 12.2).

    Multiplied by P on both sides: B·f·(W/P) = w + B·k. Only the machine's bytes per FLOP W/P (one over the ridge
    point) enters, so B* does not change when both ceilings are scaled (FLOP/s or FLOP/ms), wherever in the float range
    that puts them, as long as W/P itself is a normal float (w/W, f/P, f·W or k·P alone overflow far sooner).
    """
    require_counts(weight_bytes=weight_bytes, flops_per_sequence=flops_per_sequence,
                   bytes_per_sequence=bytes_per_sequence)
    _require_machine(peak_flops, bandwidth)
    # bytes the machine moves while it computes one sequence, minus the bytes that sequence reads: > 0 → compute wins
    margin = flops_per_sequence * (bandwidth / peak_flops) - bytes_per_sequence
    return weight_bytes / margin if margin > 0 else None


def crossover_batch(config: ModelConfig, variant: str, context: int, peak_flops: float, bandwidth: float,
                    bytes_per_value: int = 2, v1_kernel: str = "two_call") -> float | None:
    """B* (a real number; the first compute-bound batch is its ceiling), or None when no batch is compute-bound."""
    one = decode_step(config, variant, context, 1, bytes_per_value, v1_kernel)
    weight_bytes = bytes_per_value * matmul_params(config, variant)
    return roofline_crossover(weight_bytes, one.flops, one.bytes - weight_bytes, peak_flops, bandwidth)
