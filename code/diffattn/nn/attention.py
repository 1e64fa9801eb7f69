"""Lesson 05: the three attention modules, with the official parameter names so official state dicts load strictly.

    module               official file (microsoft/unilm Diff-Transformer/)      state-dict keys
    MultiheadAttention   multihead_attention.py                                 q_proj k_proj v_proj out_proj
    DiffAttentionV1      multihead_flashdiff_1.py (MultiheadFlashDiff1)         + lambda_q1 lambda_k1 lambda_q2 lambda_k2
                                                                                  subln.weight  (out_proj, no o_proj)
    DiffAttentionV2      Diff-Transformer-V2/multihead_flashdiffv2.py           q_proj k_proj v_proj o_proj lambda_proj

Head counts follow each official file, and they mean different things (read off the constructors in
multihead_flashdiff_1.py and Diff-Transformer-V2/multihead_flashdiffv2.py, and HF transformers'
models/diffllama/modeling_diffllama.py):

    baseline  num_heads = h_base query heads of width d = embed_dim / h_base
    V1        num_heads = h_base / 2 differential heads; each has two d-wide query/key heads and one 2d-wide value
              head, so q_proj still emits 2·num_heads·d = embed_dim. (HF DiffLlama's num_attention_heads counts the
              d-wide heads instead, i.e. 2× this, and pairs first half with second half, not neighbours.)
    V2        num_heads = h_base output heads, built from 2·num_heads query heads of width d sharing h_kv KV heads.

All three: forward(x, rope, cache=None) with x (b, N, d_model), rope = (cos, sin) for the positions of x (offset by
len(cache) when decoding), and an optional KV cache (`diffattn.nn.cache`: KVCache or StaticKVCache) that is read and
appended. Layout inside: (b, N, heads, d).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from diffattn.core.errors import ConfigError, require, require_positive
from diffattn.nn.functional import check_pairs_share_kv, headwise_norm, reparameterized_lambda
from diffattn.nn.functional import lambda_init as depth_schedule  # the name `lambda_init` is a constructor argument here
from diffattn.nn.cache import Cache
from diffattn.nn.diff_v1_kernel import diff_v1_attention
from diffattn.nn.kernels import BACKENDS, attention, diff_v2_gqa_attention
from diffattn.nn.norm import RMSNorm
from diffattn.nn.rope import apply_rope

Rope = tuple[Tensor, Tensor]


def state_dict_variant(keys) -> str | None:
    """Which module a set of state-dict keys belongs to, from the keys only one variant has."""
    keys = set(keys)
    if "lambda_proj.weight" in keys or "o_proj.weight" in keys:
        return DiffAttentionV2.VARIANT
    if "lambda_q1" in keys or "subln.weight" in keys:
        return DiffAttentionV1.VARIANT
    if "out_proj.weight" in keys:
        return MultiheadAttention.VARIANT
    return None


class _Attention(nn.Module):
    """What the three modules share: the backend choice, the KV-cache step, and a clear wrong-variant error."""

    VARIANT = ""

    def __init__(self, backend: str) -> None:
        super().__init__()
        require(backend in BACKENDS, f"backend must be one of {', '.join(BACKENDS)} (got {backend!r})")
        self.backend = backend

    def _check_input(self, x: Tensor) -> tuple[int, int]:
        """x must be (b, N, d_model) with the weights' dtype and device; returns (b, N)."""
        weight = self.q_proj.weight  # every forward: plain comparisons; a message is built only on failure
        if x.dim() != 3 or x.shape[-1] != weight.shape[1]:
            raise ConfigError(f"{self.VARIANT} takes x of shape (batch, seq, {weight.shape[1]}), got {tuple(x.shape)}")
        if x.dtype != weight.dtype:
            raise ConfigError(f"x is {x.dtype} but the {self.VARIANT} weights are {weight.dtype}")
        if x.device != weight.device:
            raise ConfigError(f"x is on {x.device} but the {self.VARIANT} weights are on {weight.device}")
        return x.shape[0], x.shape[1]

    @staticmethod
    def _cached(k: Tensor, v: Tensor, cache: Cache | None) -> tuple[Tensor, Tensor]:
        """Append the new keys/values to the cache and return all of them (or just these, with no cache)."""
        return (k, v) if cache is None else cache.update(k, v)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        found = state_dict_variant(key[len(prefix):] for key in state_dict if key.startswith(prefix))
        if found is not None and found != self.VARIANT:
            where = f" at {prefix.rstrip('.')!r}" if prefix else ""
            raise ConfigError(f"state dict{where} holds a {found} but this module is a {self.VARIANT}")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)


class MultiheadAttention(_Attention):
    """The baseline: softmax(q kᵀ/√d) v per head, grouped-query when num_kv_heads < num_heads.

    head_dim defaults to embed_dim // num_heads (the official layout); setting it lets a model build the
    "same query width" baseline, e.g. 2h heads of d for comparison with DIFF V2.
    """

    VARIANT = "MultiheadAttention (baseline)"

    @classmethod
    def from_config(cls, config, depth: int) -> MultiheadAttention:
        """The module of block `depth` of a GPT built from `config` (diffattn.config.GPTConfig)."""
        return cls(config.d_model, config.n_head, config.n_kv_head, config.head_dim, backend=config.backend)

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        *,
        backend: str = "auto",
    ):
        super().__init__(backend)
        num_kv_heads = num_kv_heads or num_heads
        require_positive(embed_dim=embed_dim, num_heads=num_heads, num_kv_heads=num_kv_heads)
        head_dim = _default_head_dim("embed_dim", embed_dim, num_heads, head_dim)
        _require_heads(num_heads, num_kv_heads, head_dim)
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.q_proj = nn.Linear(embed_dim, num_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * head_dim, bias=False)
        self.out_proj = nn.Linear(num_heads * head_dim, embed_dim, bias=False)

    def forward(self, x: Tensor, rope: Rope, cache: Cache | None = None) -> Tensor:
        b, n = self._check_input(x)
        q = apply_rope(self.q_proj(x).view(b, n, self.num_heads, self.head_dim), *rope)  # (b, N, h, d)
        k = apply_rope(self.k_proj(x).view(b, n, self.num_kv_heads, self.head_dim), *rope)  # (b, N, h_kv, d)
        v = self.v_proj(x).view(b, n, self.num_kv_heads, self.head_dim)  # (b, N, h_kv, d)
        k, v = self._cached(k, v, cache)  # (b, L, h_kv, d): L = cached + new tokens
        out = attention(q, k, v, causal=True, backend=self.backend)  # (b, N, h, d)
        return self.out_proj(out.reshape(b, n, self.num_heads * self.head_dim))


class DiffAttentionV1(_Attention):
    """DIFF V1 (Ye et al., ICLR 2025, eqs. 1-3), laid out like the official multihead_flashdiff_1.py.

    num_heads = h = h_base / 2 differential heads, d = embed_dim / (2h). Per head i and layer-wide scalar λ:

        q (b,N,2h,d) → RoPE → pairs (2i, 2i+1) = (q1_i, q2_i);  k likewise with 2·h_kv heads;  v (b,N,h_kv,2d)
        head_i = softmax(q1 k1ᵀ/√d) v − λ · softmax(q2 k2ᵀ/√d) v          (b, N, h, 2d)   diff_v1_attention
        λ      = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init(depth)           one fp32 scalar shared by all heads
        out    = out_proj( concat_i (1 − λ_init) · RMSNorm(head_i) )         RMSNorm over each head's 2d channels

    depth is the 0-based layer index: λ_init = 0.8 − 0.6·exp(−0.3·depth), 0.2 for the first layer. A `lambda_init`
    number replaces the schedule by that constant (the paper's Table 6 ablation: 0.8 and 0.5 in every layer).
    """

    VARIANT = "DiffAttentionV1"

    @classmethod
    def from_config(cls, config, depth: int) -> DiffAttentionV1:
        """Block `depth`'s module: n_head/2 differential heads over n_kv_head/2 KV heads (λ_init depends on depth)."""
        return cls(config.d_model, depth, config.n_head // 2, config.n_kv_head // 2, backend=config.backend,
                   lambda_init=config.lambda_init, head_scale=config.head_scale, subln_gain=config.subln_gain)

    def __init__(
        self, embed_dim: int, depth: int, num_heads: int, num_kv_heads: int | None = None, *, backend: str = "auto",
        lambda_init: float | None = None, head_scale: float | str | None = None, subln_gain: float = 1.0,
    ):
        super().__init__(backend)
        num_kv_heads = num_kv_heads or num_heads
        require_positive(embed_dim=embed_dim, num_heads=num_heads, num_kv_heads=num_kv_heads)
        require(
            embed_dim % (2 * num_heads) == 0,
            f"DIFF V1 needs embed_dim ({embed_dim}) divisible by 2·num_heads ({2 * num_heads}): each head has two "
            f"d-wide query halves",
        )
        head_dim = embed_dim // num_heads // 2
        _require_heads(num_heads, num_kv_heads, head_dim)
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        if lambda_init is not None:
            require(0.0 < lambda_init < 1.0, f"lambda_init must lie in (0, 1) (got {lambda_init})")
        self.lambda_init = depth_schedule(depth) if lambda_init is None else float(lambda_init)
        # headwise_norm multiplies each normalised head by 1 − this: λ_init itself unless a study sets the scale apart
        # ("schedule": 1 − the depth schedule whatever λ_init is; a number s: s). λ_init is passed unchanged in the
        # paper's case, so its product is exactly the one it always was.
        self.norm_lambda = (self.lambda_init if head_scale is None else depth_schedule(depth)
                            if head_scale == "schedule" else 1.0 - float(head_scale))
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)  # 2h heads of d
        self.k_proj = nn.Linear(embed_dim, 2 * num_kv_heads * head_dim, bias=False)  # 2·h_kv heads of d
        self.v_proj = nn.Linear(embed_dim, 2 * num_kv_heads * head_dim, bias=False)  # h_kv heads of 2d
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        # N(0, 0.1²) makes λ start within about ±0.16 of λ_init at d = 128. The vectors are fp32 and stay fp32 when the
        # module is cast to bf16/fp16 (see _apply): exp(λ_q·λ_k) amplifies their rounding, and one λ scales every head.
        self.lambda_q1 = nn.Parameter(torch.zeros(head_dim, dtype=torch.float32).normal_(mean=0.0, std=0.1))
        self.lambda_k1 = nn.Parameter(torch.zeros(head_dim, dtype=torch.float32).normal_(mean=0.0, std=0.1))
        self.lambda_q2 = nn.Parameter(torch.zeros(head_dim, dtype=torch.float32).normal_(mean=0.0, std=0.1))
        self.lambda_k2 = nn.Parameter(torch.zeros(head_dim, dtype=torch.float32).normal_(mean=0.0, std=0.1))
        self.subln = RMSNorm(2 * head_dim, eps=1e-5, elementwise_affine=True)
        nn.init.constant_(self.subln.weight, subln_gain)

    LAMBDA_VECTORS = ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")

    def _apply(self, fn, recurse=True):
        """Every tensor conversion (.to, .cuda, .half, .bfloat16) applies as usual, except that the λ vectors are cast
        back to fp32 when a conversion made them fp16/bf16; the rest of the layer takes the new dtype."""
        super()._apply(fn, recurse)
        for name in self.LAMBDA_VECTORS:
            vector = getattr(self, name)
            if vector.dtype in (torch.float16, torch.bfloat16):
                vector.data = vector.data.float()
        return self

    def lambda_full(self) -> Tensor:
        """The layer's λ (0-dim, fp32): exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init."""
        return reparameterized_lambda(self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2, self.lambda_init)

    def differential_heads(self, x: Tensor, rope: Rope, cache: Cache | None = None) -> Tensor:
        """Every head's (A1 − λ·A2) V before the norm: (b, N, h, 2d)."""
        b, n = self._check_input(x)
        h, h_kv, d = self.num_heads, self.num_kv_heads, self.head_dim
        q = apply_rope(self.q_proj(x).view(b, n, 2 * h, d), *rope)  # (b, N, 2h, d)
        k = apply_rope(self.k_proj(x).view(b, n, 2 * h_kv, d), *rope)  # (b, N, 2h_kv, d)
        v = self.v_proj(x).view(b, n, h_kv, 2 * d)  # (b, N, h_kv, 2d): one wide value head per KV group
        k, v = self._cached(k, v, cache)  # (b, L, ·, ·)
        # heads (2i, 2i+1) = head i's two maps; on CPU the maps are combined before V (lesson 12, diff_v1_kernel)
        return diff_v1_attention(q, k, v, self.lambda_full(), backend=self.backend)  # (A1 − λA2) V: (b, N, h, 2d)

    def forward(self, x: Tensor, rope: Rope, cache: Cache | None = None) -> Tensor:
        attn = self.differential_heads(x, rope, cache)  # (b, N, h, 2d)
        attn = headwise_norm(attn, self.subln.weight, self.norm_lambda, self.subln.eps)  # per head, × (1 − λ_init)
        return self.out_proj(attn.flatten(2))  # (b, N, h·2d = embed_dim) -> (b, N, embed_dim)


class DiffAttentionV2(_Attention):
    """DIFF V2 (Microsoft, HF blog 2026-01-20), laid out like the official multihead_flashdiffv2.py.

    num_heads = h = h_base; 2h query heads of d share h_kv KV heads; one stock GQA attention call:

        q (b,N,2h,d), k, v (b,N,h_kv,d) → RoPE on q, k → out = attention(q, k, v)     (b, N, 2h, d)
        head_i = out[:, :, 2i] − σ(λ_{t,i}) · out[:, :, 2i+1],   λ = lambda_proj(x)  (b, N, h, d)
        result = o_proj(concat_i head_i)                                              o_proj: h·d → d_model

    No per-head norm, no (1 − λ_init), no λ_init: σ keeps each row's weight sum 1 − σ(λ) inside (0, 1).
    The pair (2i, 2i+1) must read one KV head, so 2h / h_kv must be even (checked here).
    """

    VARIANT = "DiffAttentionV2"

    @classmethod
    def from_config(cls, config, depth: int) -> DiffAttentionV2:
        """Block `depth`'s module: n_head output heads, each a pair of query heads, over n_kv_head KV heads."""
        return cls(config.d_model, config.n_head, config.n_kv_head, config.head_dim, backend=config.backend,
                   pair=config.v2_pair, gate=config.v2_gate)

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        *,
        backend: str = "auto",
        pair: str = "difference",
        gate: str = "learned",
    ):
        super().__init__(backend)
        num_kv_heads = num_kv_heads or num_heads
        require_positive(d_model=d_model, num_heads=num_heads, num_kv_heads=num_kv_heads)
        head_dim = _default_head_dim("d_model", d_model, num_heads, head_dim)
        _require_even_head_dim(head_dim)
        check_pairs_share_kv(2 * num_heads, num_kv_heads)
        require(pair in ("difference", "sum") and gate in ("learned", "half"),
                f"pair is difference or sum, gate learned or half (got {pair!r}, {gate!r})")
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        # lesson 09's mechanism experiment: "sum" adds the pair's second map instead of subtracting it; "half" fixes
        # σ(λ) at ½ (what W_λ = 0 gives), so λ_proj is not used
        self.subtract, self.learned_gate = pair == "difference", gate == "learned"
        self.q_proj = nn.Linear(d_model, 2 * num_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * head_dim, d_model, bias=False)
        self.lambda_proj = nn.Linear(d_model, num_heads, bias=False)

    def forward(self, x: Tensor, rope: Rope, cache: Cache | None = None) -> Tensor:
        b, n = self._check_input(x)
        h, h_kv, d = self.num_heads, self.num_kv_heads, self.head_dim
        q = apply_rope(self.q_proj(x).view(b, n, 2 * h, d), *rope)  # (b, N, 2h, d)
        k = apply_rope(self.k_proj(x).view(b, n, h_kv, d), *rope)  # (b, N, h_kv, d)
        v = self.v_proj(x).view(b, n, h_kv, d)
        k, v = self._cached(k, v, cache)
        logits = self.lambda_proj(x) if self.learned_gate else x.new_zeros(b, n, h)  # σ(0) = ½
        out = diff_v2_gqa_attention(q, k, v, logits, causal=True, backend=self.backend,
                                    subtract=self.subtract)  # (b, N, h, d)
        return self.o_proj(out.reshape(b, n, h * d))


def _default_head_dim(width_name: str, width: int, num_heads: int, head_dim: int | None) -> int:
    """head_dim as given, or width / num_heads (the official default), which must then divide evenly."""
    if head_dim is not None:
        return head_dim
    require(width % num_heads == 0, f"{width_name} ({width}) must be divisible by num_heads ({num_heads})")
    return width // num_heads


def _require_even_head_dim(head_dim: int) -> None:
    require(head_dim % 2 == 0, f"RoPE rotates pairs of channels, so head_dim must be even (got {head_dim})")


def _require_heads(num_heads: int, num_kv_heads: int, head_dim: int) -> None:
    require(num_heads % num_kv_heads == 0, f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    _require_even_head_dim(head_dim)
