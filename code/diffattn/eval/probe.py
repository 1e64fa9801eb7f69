"""Look inside a GPT while it runs: every attention call's logits and weights, λ per layer, every block's output.

The three attention modules call one kernel entry point, `diffattn.nn.kernels.attention(q, k, v, causal, backend)`
(V1 twice per layer, once per map; the baseline and V2 once). Inside `Probe`, V1's fused CPU kernel is switched off
(`diff_v1_kernel.separate_maps`, so V1 makes its two calls) and that entry point is replaced by the
explicit computation below, which returns what the kernels return (up to fp32 rounding) and can record or change
its intermediate values:

    q (b, N, H, d), k and v (b, N_k, H_kv, ·)      GQA: query head i reads KV head i // (H / H_kv)
    z = q kᵀ / √d                                   (b, H, N, N_k) logits, for every pair (future ones included)
    z = quantize(z)                                 optional, on the visible (causal) entries: lesson 10
    A = softmax(z masked to the causal entries)     (b, H, N, N_k) weights
    out = A v                                       (b, N, H, d_v)

Effective maps (`effective_maps`), per layer, (b, heads, N, N_k):
    baseline  A
    diff_v1   A1 − λ·A2           λ = the layer's lambda_full() (a patched λ included)
    diff_v2   A_2i − σ(λ_t,i)·A_2i+1   σ(λ) read from the layer's lambda_proj output (a patched one included)
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor, nn

import diffattn.nn.attention as attention_module
import diffattn.nn.diff_v1_kernel as diff_v1_module
import diffattn.nn.kernels as kernels_module
from diffattn.nn.attention import DiffAttentionV1, DiffAttentionV2
from diffattn.nn.functional import causal_mask

Quantizer = Callable[[Tensor, Tensor], Tensor]  # (logits, visible mask) -> logits


def to_model(model: nn.Module, tensor: Tensor) -> Tensor:
    """`tensor` on the model's device (examples are built on the CPU)."""
    weight = next(model.parameters(), None)
    return tensor if weight is None else tensor.to(weight.device)


@dataclass
class Call:
    layer: int
    logits: Tensor | None  # (b, H, N, N_k), invisible entries as computed (not −inf)
    weights: Tensor | None  # (b, H, N, N_k)
    visible: Tensor  # (N, N_k) bool


@dataclass
class Probe:
    """`with Probe(model) as probe: model(tokens)`; then probe.calls, probe.hidden, probe.gates, effective_maps().
    With `on_call`, each call goes to it instead of into probe.calls, so the caller keeps only what it needs (whole
    (b, H, N, N_k) maps of every layer do not fit in memory at gpu-small's size)."""

    model: nn.Module
    record: bool = True
    quantizer: Quantizer | None = None
    on_call: Callable[[Call], None] | None = None
    calls: list[Call] = field(default_factory=list)
    hidden: dict[int, Tensor] = field(default_factory=dict)  # block l's output, (b, N, d_model)
    gates: dict[int, Tensor] = field(default_factory=dict)  # V2 layer l's σ(λ), (b, N, h)
    layer: int = -1

    def __enter__(self) -> "Probe":
        self._saved = (attention_module.attention, kernels_module.attention, diff_v1_module.attention)
        attention_module.attention = kernels_module.attention = diff_v1_module.attention = self._attention
        self._unfused = contextlib.ExitStack()
        self._unfused.enter_context(diff_v1_module.separate_maps())
        self._hooks = []
        for i, block in enumerate(self.model.blocks):
            self._hooks.append(block.register_forward_pre_hook(lambda _m, _a, i=i: setattr(self, "layer", i)))
            if self.record:
                self._hooks.append(block.register_forward_hook(lambda _m, _a, out, i=i: self.hidden.__setitem__(i, out)))
                if isinstance(block.attn, DiffAttentionV2):
                    self._hooks.append(block.attn.lambda_proj.register_forward_hook(
                        lambda _m, _a, out, i=i: self.gates.__setitem__(i, torch.sigmoid(out))))
        return self

    def __exit__(self, *exc: object) -> None:
        attention_module.attention, kernels_module.attention, diff_v1_module.attention = self._saved
        self._unfused.close()
        for hook in self._hooks:
            hook.remove()

    def _attention(self, q: Tensor, k: Tensor, v: Tensor, causal: bool = False, backend: str = "auto") -> Tensor:
        group = q.shape[2] // k.shape[2]
        k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)  # (b, N_k, H, ·)
        logits = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
        n, n_k = logits.shape[-2:]
        visible = causal_mask(n, n_k, q.device) if causal else torch.ones(n, n_k, dtype=torch.bool, device=q.device)
        if self.quantizer is not None:
            logits = self.quantizer(logits, visible)
        weights = torch.softmax(logits.float().masked_fill(~visible, -math.inf), dim=-1).to(q.dtype)
        if self.record:
            (self.on_call or self.calls.append)(Call(self.layer, logits, weights, visible))
        return torch.einsum("bhqk,bkhd->bqhd", weights, v)

    def effective_maps(self) -> dict[int, Tensor]:
        """{layer: (b, heads, N, N_k)} the map each output head applies to the values (see the module docstring)."""
        maps = {}
        for layer, block in enumerate(self.model.blocks):
            calls = [c for c in self.calls if c.layer == layer]
            attn = block.attn
            if isinstance(attn, DiffAttentionV1):
                maps[layer] = calls[0].weights - attn.lambda_full().detach() * calls[1].weights
            elif isinstance(attn, DiffAttentionV2):
                gate = self.gates[layer].permute(0, 2, 1).unsqueeze(-1)  # (b, h, N, 1)
                maps[layer] = calls[0].weights[:, 0::2] - gate * calls[0].weights[:, 1::2]
            else:
                maps[layer] = calls[0].weights
        return maps
