"""Lesson 11: change how much of the second map a trained DIFF model subtracts, without retraining.

    V1, per layer l:  head_i = (1 − λ_init,l) · RMSNorm( A1 V − λ_l · A2 V )        λ_l = exp(λq1·λk1) − exp(λq2·λk2) + λ_init,l
        mode "fixed"  λ_l → v             (every layer the same v)
        mode "scale"  λ_l → s · λ_l       (each layer keeps its own trained λ, times s; s = 1 is the trained model)
        λ_init stays as trained: it also sets the (1 − λ_init) output scale, which the next layers were trained with.
    V2, per layer, token t, head i:  head_i = A_2i V − σ(λ_t,i) · A_2i+1 V              λ_t = W_λ x_t
        mode "fixed"  σ(λ_t,i) → c ∈ (0, 1)  (every token and head)
        mode "offset" λ_t,i → λ_t,i + δ      (σ stays in (0, 1) for any finite δ; δ = 0 is the trained model)

`patched(model, value, mode)` applies one setting to every attention layer and restores the model on exit, even when
the body raises. The patch shadows a method (V1's `lambda_full`) or swaps a submodule (V2's `lambda_proj`): no
parameter is touched, so nothing can leak into the trained weights.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterator, Sequence

import torch
from torch import Tensor, nn

from diffattn.core.errors import require
from diffattn.nn.attention import DiffAttentionV1, DiffAttentionV2
from diffattn.pure import variants

# by the variant's λ (diffattn.pure.variants): V1's one λ per layer is fixed or scaled, V2's gate σ(λ) fixed or its
# logit offset; the first mode is each kind's default
MODES = {"per_layer": ("scale", "fixed"), "gate": ("fixed", "offset")}
TRAINED = {"fixed": None, "scale": 1.0, "offset": 0.0}  # the value of each mode that is the trained model itself


def modes(variant: str) -> tuple[str, ...]:
    """The λ settings lambda-sweep can apply to `variant`'s model; ConfigError for a variant without λ."""
    kind = variants.get(variant).base.lambda_kind
    require(kind in MODES, f"{variant} has no λ to sweep (only {', '.join(v for v in variants.VARIANTS if variants.get(v).base.lambda_kind)} do)")
    return MODES[kind]


def check_value(variant: str, value: float, mode: str = "fixed") -> None:
    """ConfigError unless `value` is allowed: finite, and for V2's fixed σ(λ) strictly inside (0, 1)."""
    _check(variants.get(variant).base.lambda_kind, value, mode, variant)


def _check(lambda_kind: str, value: float, mode: str, name: str) -> None:
    require(lambda_kind in MODES, f"{name} has no λ to sweep")
    require(mode in MODES[lambda_kind], f"{name} λ modes are {', '.join(MODES[lambda_kind])} (got {mode!r})")
    require(math.isfinite(value), f"λ setting must be finite (got {value})")
    if lambda_kind == "gate" and mode == "fixed":
        require(0.0 < value < 1.0, f"DIFF V2's coefficient σ(λ) lies strictly in (0, 1) (got {value})")


class _ShiftedLogits(nn.Module):
    """Stands in for V2's lambda_proj: the trained logits + δ, or one constant logit log(c / (1 − c)) everywhere."""

    def __init__(self, trained: nn.Module, offset: float = 0.0, constant: float | None = None):
        super().__init__()
        self.trained, self.offset, self.constant = trained, offset, constant

    def forward(self, x: Tensor) -> Tensor:
        logits = self.trained(x)  # (b, N, h)
        if self.constant is not None:
            return torch.full_like(logits, math.log(self.constant / (1.0 - self.constant)))
        return logits + self.offset


@contextlib.contextmanager
def _patch_v1(attn: DiffAttentionV1, value: float, mode: str) -> Iterator[None]:
    trained = attn.lambda_full().detach()
    lam = trained * value if mode == "scale" else torch.tensor(float(value), dtype=trained.dtype)
    attn.lambda_full = lambda: lam  # an instance attribute shadows the method
    try:
        yield
    finally:
        del attn.lambda_full


@contextlib.contextmanager
def _patch_v2(attn: DiffAttentionV2, value: float, mode: str) -> Iterator[None]:
    trained = attn.lambda_proj
    attn.lambda_proj = _ShiftedLogits(trained, constant=value) if mode == "fixed" else _ShiftedLogits(trained, value)
    try:
        yield
    finally:
        attn.lambda_proj = trained


def attention_layers(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, (DiffAttentionV1, DiffAttentionV2))]


@contextlib.contextmanager
def patched(model: nn.Module, value: float | None, mode: str = "fixed") -> Iterator[nn.Module]:
    """Every DIFF layer of `model` with λ set by (value, mode); None leaves the model as trained."""
    variant = model.config.attention
    if value is not None:
        check_value(variant, value, mode)
    with contextlib.ExitStack() as stack:
        for attn in attention_layers(model) if value is not None else ():
            patch = _patch_v1 if isinstance(attn, DiffAttentionV1) else _patch_v2
            stack.enter_context(patch(attn, value, mode))
        yield model


def v1_forward(attn: DiffAttentionV1, x: Tensor, rope: tuple[Tensor, Tensor], lam: float) -> Tensor:
    """The V1 layer's output (b, N, d_model) with its λ replaced by `lam` (λ_init and everything else as trained).
    The layer's own arithmetic: |lam| up to 1e15, beyond which its float32 RMSNorm of λ·A2V overflows."""
    _check("per_layer", float(lam), "fixed", "DIFF V1")
    with _patch_v1(attn, lam, "fixed"):
        return attn(x, rope)


def v2_forward(attn: DiffAttentionV2, x: Tensor, rope: tuple[Tensor, Tensor], gate: float) -> Tensor:
    """The V2 layer's output (b, N, d_model) with σ(λ_t,i) replaced by `gate` ∈ (0, 1) for every token and head."""
    _check("gate", gate, "fixed", "DIFF V2")
    with _patch_v2(attn, gate, "fixed"):
        return attn(x, rope)


def sweep_model(model: nn.Module, values: Sequence[float], evaluate: Callable[[nn.Module], float],
                 mode: str = "fixed") -> list[float]:
    """evaluate(model) with every DIFF layer patched to each value in turn; the model is restored afterwards."""
    variant = model.config.attention
    modes(variant)  # a variant without λ fails here, also with no values
    for value in values:  # every value is checked before anything runs
        check_value(variant, value, mode)
    scores = []
    for value in values:
        with patched(model, value, mode):
            scores.append(float(evaluate(model)))
    return scores


def best_value(values: Sequence[float], scores: Sequence[float]) -> float:
    """The value with the highest score; the first of equal scores; a NaN score (a diverged setting) never wins."""
    require(len(values) == len(scores) >= 1, f"need one score per value (got {len(values)} values, {len(scores)} scores)")
    finite = [i for i, s in enumerate(scores) if not math.isnan(s)]
    require(bool(finite), "every score is NaN: no setting can be chosen")
    return values[max(finite, key=lambda i: scores[i])]  # max keeps the first maximal index


def trained_lambdas(model: nn.Module, inputs: Tensor) -> list[float]:
    """Per layer: V1's λ, or V2's σ(λ) averaged over the tokens and heads of `inputs` (what the model uses)."""
    out = []
    for attn in attention_layers(model):
        if isinstance(attn, DiffAttentionV1):
            out.append(attn.lambda_full().item())
    if out:
        return out
    gates = []
    hooks = [a.lambda_proj.register_forward_hook(lambda _m, _a, o: gates.append(torch.sigmoid(o).mean().item()))
             for a in attention_layers(model)]
    with torch.no_grad():
        model(inputs)
    for hook in hooks:
        hook.remove()
    return gates


def sweep_table(model: nn.Module, values: Sequence[float], mode: str, evaluate: Callable[[nn.Module], dict]) -> dict:
    """evaluate(model) -> {metric: number} at the trained setting and at every value (the model is restored)."""
    for value in values:
        check_value(model.config.attention, value, mode)
    rows = [{"value": None, **evaluate(model)}]
    for value in values:
        with patched(model, value, mode):
            rows.append({"value": value, **evaluate(model)})
    return {"mode": mode, "trained_value": TRAINED[mode], "rows": rows}
