"""Exercises 11.1-11.4 · the λ sweep on a trained model.  Lesson: lessons/11-lambda-sweep.md

Grade them with `make grade`, or only these:
    .venv/bin/python -m pytest -m "graded and ex11" --impl exercises

You may use torch, `diffattn.nn.kernels.attention` (grouped-query, causal, layout (b, N, heads, d)),
`diffattn.nn.rope.apply_rope`, `diffattn.nn.functional.rms_norm` and `diffattn.core.errors.require`; do not import
`diffattn.eval.lambda_sweep` (that grades the reference, not you). The graders use small models trained by the test
suite on the copy task of lesson 07, and compare with the layers' own forward pass at atol 1e-5.
"""

from __future__ import annotations

from typing import Callable, Sequence

from torch import Tensor, nn


def v1_forward(attn: nn.Module, x: Tensor, rope: tuple[Tensor, Tensor], lam: float) -> Tensor:
    """Exercise 11.1 · what a trained DIFF V1 layer outputs when its λ is replaced by `lam`.

    `attn` is a `diffattn.nn.attention.DiffAttentionV1` with h = attn.num_heads differential heads, h_kv =
    attn.num_kv_heads KV heads, d = attn.head_dim, the trained weights q_proj, k_proj, v_proj, out_proj and
    subln.weight (2d,), and the float attn.lambda_init (its λ_init, fixed by its depth). Its own forward computes, with
    λ = attn.lambda_full():

        q = apply_rope(q_proj(x) as (b, N, 2h, d))      query heads 2i and 2i+1 are the pair (q1, q2) of head i
        k = apply_rope(k_proj(x) as (b, N, 2h_kv, d))   key heads 2j and 2j+1 are (k1, k2) of KV head j
        v = v_proj(x) as (b, N, h_kv, 2d)               one 2d-wide value per KV head, shared by both maps
        head_i = A1 v − λ · A2 v                         A1 = causal softmax(q1 k1ᵀ/√d), A2 likewise; (b, N, h, 2d)
        out = out_proj( concat_i (1 − λ_init) · RMSNorm(head_i) ⊙ subln.weight )    RMS over each head's 2d, eps 1e-5

    Replace λ, and only λ, by `lam`: λ_init keeps its trained value in the (1 − λ_init) factor (it is a constant the
    next layers were trained with, not the λ being swept). Leave `attn` unchanged.

    Args:
        attn: the layer; x: (b, N, d_model); rope: (cos, sin) for positions 0 … N−1, as the model passes them.
        lam: any finite float up to 1e15 in size (λ is unconstrained in V1; negative values are allowed). The result
            is the layer's own computation, whose float32 RMSNorm squares λ·A2V: far beyond 1e15 it overflows.
    Returns:
        (b, N, d_model), same dtype as x.
    Raises:
        ConfigError (a ValueError) if lam is not finite.

    Example: with lam = float(attn.lambda_full()) the result equals attn(x, rope).
    """
    raise NotImplementedError("exercise 11.1: v1_forward")


def v2_forward(attn: nn.Module, x: Tensor, rope: tuple[Tensor, Tensor], gate: float) -> Tensor:
    """Exercise 11.2 · what a trained DIFF V2 layer outputs when σ(λ) is replaced by a fixed `gate`.

    `attn` is a `diffattn.nn.attention.DiffAttentionV2` with h = attn.num_heads output heads built from 2h query heads,
    h_kv = attn.num_kv_heads, d = attn.head_dim, and weights q_proj, k_proj, v_proj, o_proj, lambda_proj. Its forward:

        q = apply_rope(q_proj(x) as (b, N, 2h, d)); k = apply_rope(k_proj(x) as (b, N, h_kv, d)); v = v_proj(x) likewise
        o = attention(q, k, v, causal=True)                          (b, N, 2h, d), one grouped-query call
        head_i = o[:, :, 2i] − σ(λ_t,i) · o[:, :, 2i+1]              λ = lambda_proj(x), (b, N, h)
        out = o_proj(concat_i head_i)                                (b, N, d_model)

    Replace σ(λ_t,i) by `gate` for every token t and head i. Leave `attn` unchanged.

    Args:
        gate: the coefficient itself (not a logit), strictly inside (0, 1), as σ(λ) always is.
    Returns:
        (b, N, d_model).
    Raises:
        ConfigError (a ValueError) if gate is not a finite number strictly between 0 and 1.

    Example: gate 0.5 everywhere is what a layer whose lambda_proj outputs zeros computes.
    """
    raise NotImplementedError("exercise 11.2: v2_forward")


def sweep_model(model: nn.Module, values: Sequence[float], evaluate: Callable[[nn.Module], float]) -> list[float]:
    """Exercise 11.3 · evaluate a trained model once per λ setting, then give it back exactly as it was.

    `model` is a `diffattn.model.gpt.GPT` whose `model.config.attention` is "diff_v1" or "diff_v2"; its attention layers
    are `model.blocks[l].attn`. For each value in order:
        diff_v1: every layer computes with λ := value (exercise 11.1; λ_init untouched);
        diff_v2: every layer computes with σ(λ) := value (exercise 11.2);
        score = float(evaluate(model)), called exactly once per value while the model is patched.

    Afterwards the model must compute exactly what it computed before: same parameters, same λ_init, same outputs.
    That holds even when `evaluate` raises (the exception propagates; use try/finally or a context manager).
    Hint: `attn.forward = f` sets an instance attribute that nn.Module's call uses instead of the class's forward;
    `del attn.forward` removes it again.

    Returns:
        [score for each value], in the order of `values`.
    Raises:
        ConfigError (a ValueError), before evaluate is ever called, if the model is not a DIFF model or any value is
        not allowed (V1: not finite; V2: not strictly inside (0, 1)).
    """
    raise NotImplementedError("exercise 11.3: sweep_model")


def best_value(values: Sequence[float], scores: Sequence[float]) -> float:
    """Exercise 11.4 · the value whose score is highest (scores: higher is better, e.g. accuracy or −loss).

    Scores can all be negative (−loss). Of several equal best scores, return the value that comes first. A NaN score
    (a setting that diverged) never wins.

    Raises:
        ConfigError (a ValueError) if values and scores differ in length, are empty, or every score is NaN.

    Example:
        >>> best_value([0.2, 0.5, 0.8], [-1.3, -0.9, -0.9])
        0.5
    """
    raise NotImplementedError("exercise 11.4: best_value")
