"""Lesson 06: one attention entry point, three kernels behind it.

`attention(q, k, v, causal, backend)` takes the flash-attn / official-code layout

    q (b, N_q, H_q, d)     k (b, N_k, H_kv, d)     v (b, N_k, H_kv, d_v)    ->    (b, N_q, H_q, d_v)

with grouped-query attention when H_q is a multiple of H_kv (query head i reads KV head i // (H_q / H_kv)) and a
causal mask aligned bottom-right (query i sees keys j ≤ i + N_k − N_q, what KV-cache decoding needs).

    backend       what runs                                              when "auto" picks it
    "flash_attn"  flash_attn.flash_attn_func (Tri Dao's FA2 package)     installed, CUDA, fp16/bf16, d ≤ 256
    "sdpa"        torch.nn.functional.scaled_dot_product_attention       otherwise (every CPU run)
    "math"        diffattn.nn.functional.scaled_dot_product_attention    never: requested explicitly, the reference

Stock flash-attn needs d_v == d. DIFF V1's values are 2d wide, so the flash path splits V into d-wide slices and
runs one call per slice (`split_value_attention`): the workaround of the official `multihead_flashdiff_2.py`, which
computes q kᵀ once per slice. SDPA picks its own kernel inside (FLASH, EFFICIENT, cuDNN or MATH);
`sdpa_kernel_support` reports which of them accept given tensors.

`diff_v2_gqa_attention` is DIFF V2 on top of `attention`: one grouped-query call over the 2h query heads, then the
subtraction of each interleaved pair (lesson 07's exercise 07.1).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import re
import warnings
from typing import Iterator

import torch
from torch import Tensor

from diffattn.core.errors import ConfigError, require
from diffattn.core.names import BACKENDS
from diffattn.nn.functional import causal_mask, check_pairs_share_kv, sigmoid
from diffattn.nn.functional import scaled_dot_product_attention as math_attention

SDPA_KERNELS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")

# Largest |output − fp64 reference| accepted per dtype, for outputs of unit-scale random inputs (tests and
# backend_agreement use these). fp64/fp32 differ from the reference only by summation order; bf16 keeps 8 bits of
# mantissa and flash kernels round the probabilities to it before the PV product.
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 4e-2}

_SDPA_HAS_GQA = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


# flash-attn < 2.1 aligns the causal mask top-left, which is wrong as soon as N_q < N_k (cached decoding).
FLASH_ATTN_MIN_VERSION = (2, 1)


# Looked up once, at import, without importing the package: every attention call reads this constant, and under
# torch.compile a plain global costs nothing, while a find_spec call breaks the graph (torch 2.11, the GPU machine's).
FLASH_ATTN_FOUND = importlib.util.find_spec("flash_attn") is not None


def flash_attn_problem() -> str | None:
    """Why the flash-attn package cannot be used here, or None when it can."""
    return "the flash-attn package is not installed" if not FLASH_ATTN_FOUND else _flash_attn_import_problem()


@functools.lru_cache(maxsize=None)
def _flash_attn_import_problem() -> str | None:
    """Probed once per process, lazily, only where the package exists: being installed is not enough, since a build for
    another torch (ABI mismatch) fails at import."""
    try:
        import flash_attn
    except Exception as exc:  # ImportError, OSError (undefined symbol), RuntimeError: any of them means "unusable"
        return f"flash-attn is installed but does not import ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    version = getattr(flash_attn, "__version__", "0")
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if numbers < FLASH_ATTN_MIN_VERSION:
        wanted = ".".join(map(str, FLASH_ATTN_MIN_VERSION))
        return f"flash-attn {version} aligns the causal mask top-left (decoding needs ≥ {wanted})"
    return None


def flash_attn_installed() -> bool:
    """True when flash-attn imports and is recent enough (it is never imported at module load: CPUs lack it)."""
    return flash_attn_problem() is None


def available_backends() -> list[str]:
    """Backends usable on this machine, fastest first."""
    fast = ["flash_attn"] if torch.cuda.is_available() and flash_attn_installed() else []
    return fast + ["sdpa", "math"]


def flash_attn_unsupported(q: Tensor, k: Tensor, v: Tensor) -> str | None:
    """Why flash-attn cannot take these tensors, or None when it can."""
    d = q.shape[-1]
    if not q.is_cuda:  # checked first: the answer for CPU tensors must not depend on what is installed
        return f"tensors are on {q.device.type}, flash-attn needs CUDA"
    problem = flash_attn_problem()
    if problem:
        return problem
    if q.dtype not in (torch.float16, torch.bfloat16):
        return f"flash-attn needs fp16 or bf16 (got {q.dtype})"
    if d % 8 or d > 256:
        return f"flash-attn needs a head dim that is a multiple of 8 and ≤ 256 (got {d})"
    if v.shape[-1] % d:
        return f"value width {v.shape[-1]} is not a multiple of d = {d}, so V cannot be split into d-wide slices"
    return None


def resolve_backend(q: Tensor, k: Tensor, v: Tensor, requested: str = "auto") -> str:
    """The backend `attention` will run for these tensors: "flash_attn", "sdpa" or "math"."""
    if requested not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)} (got {requested!r})")
    if requested not in ("auto", "flash_attn"):
        return requested
    why_not = flash_attn_unsupported(q, k, v)
    if why_not is None:
        return "flash_attn"
    if requested != "auto":
        raise ConfigError(f"backend 'flash_attn' cannot run: {why_not}")
    if q.is_cuda and FLASH_ATTN_FOUND and flash_attn_problem():
        _warn_once(f"using PyTorch SDPA instead of flash-attn: {flash_attn_problem()}")
    return "sdpa"


@functools.lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, backend: str = "auto") -> Tensor:
    """Multi-head (grouped-query) attention in the (b, N, H, d) layout; see the module docstring."""
    _check_shapes(q, k, v, causal)
    return _KERNELS[resolve_backend(q, k, v, backend)](q, k, v, causal)


def value_slices(q: Tensor, k: Tensor, v: Tensor, backend: str = "auto") -> int:
    """How many kernel calls `attention` makes for these tensors: d_v / d where the backend splits wide values
    (flash-attn always, SDPA on CPU, see `_sdpa_any_value_width`), else 1. Each call computes q kᵀ again."""
    d, d_v = q.shape[-1], v.shape[-1]
    chosen = resolve_backend(q, k, v, backend)
    splits = d_v != d and (chosen == "flash_attn" or (chosen == "sdpa" and q.device.type == "cpu"))
    return d_v // d if splits else 1


def split_value_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, backend: str = "auto") -> Tensor:
    """attention(q, k, v) computed as d-wide value slices, concatenated: A·[V₁ V₂] = [A·V₁  A·V₂].

    Exact by linearity; the cost is one q kᵀ and one softmax per slice. This is how equal-dims kernels (stock
    flash-attn, SDPA's FLASH kernel) run DIFF V1's 2d-wide values.
    """
    d = q.shape[-1]
    require(v.shape[-1] % d == 0, f"value width {v.shape[-1]} must be a multiple of d = {d} to split it")
    return torch.cat([attention(q, k, part, causal, backend) for part in v.split(d, dim=-1)], dim=-1)


def diff_v2_gqa_attention(
    q: Tensor, k: Tensor, v: Tensor, lambda_logits: Tensor, causal: bool = True, backend: str = "auto",
    subtract: bool = True,
) -> Tensor:
    """DIFF V2 for all heads at once: ONE grouped-query attention call, then subtract interleaved pairs.

    q (b, N, 2h, d), k and v (b, N_k, h_kv, d), lambda_logits (b, N, h) -> (b, N, h, d).

        out = attention(q, k, v)                     (b, N, 2h, d)   any stock GQA kernel
        out[:, :, 0::2] − σ(λ) · out[:, :, 1::2]     (b, N, h, d)    pairs (2i, 2i+1) share K and V

    Pairing adjacent heads works because a GQA group is a run of consecutive query heads; halves (`chunk(2)`) would
    pair heads from different groups (check_pairs_share_kv refuses such head counts). `subtract=False` adds the
    second map instead (lesson 09's control: the same heads and gate, nothing cancelled).
    """
    num_q_heads, num_kv_heads = q.shape[2], k.shape[2]
    check_pairs_share_kv(num_q_heads, num_kv_heads)
    # V2's values are d wide like its keys (the kernel below would also take a 2d-wide V1 value and return 2d)
    require(v.shape[-1] == k.shape[-1], f"values must have the keys' head_dim {k.shape[-1]} (got {v.shape[-1]})")
    expected = (q.shape[0], q.shape[1], num_q_heads // 2)
    require(
        tuple(lambda_logits.shape) == expected,
        f"lambda_logits must be (batch, seq, heads) = {expected}, got {tuple(lambda_logits.shape)}",
    )
    out = attention(q, k, v, causal=causal, backend=backend)  # (b, N, 2h, d)
    gate = sigmoid(lambda_logits).unsqueeze(-1).to(out.dtype)  # (b, N, h, 1): one σ(λ) per token and head
    return out[:, :, 0::2] - gate * out[:, :, 1::2] if subtract else out[:, :, 0::2] + gate * out[:, :, 1::2]


def _flash_attn(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    if v.shape[-1] != q.shape[-1]:
        return split_value_attention(q, k, v, causal, backend="flash_attn")
    from flash_attn import flash_attn_func  # lazy: only CUDA machines have it

    # flash-attn ≥ 2.1 aligns the causal mask bottom-right and maps query head i to KV head i // (H_q / H_kv).
    return flash_attn_func(q, k, v, causal=causal)


def _sdpa_any_value_width(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """The "sdpa" backend. SDPA's fused CPU kernel takes equal widths only, so 2d-wide values would fall back to its
    MATH kernel, which materialises the N×N map; two fused calls on d-wide slices are faster on CPU (README,
    "Benchmarks"). On CUDA, SDPA's EFFICIENT and cuDNN kernels take d_v ≠ d in one call, so nothing is split there."""
    if q.device.type == "cpu" and v.shape[-1] != q.shape[-1]:
        return torch.cat([_sdpa(q, k, part, causal) for part in v.split(q.shape[-1], dim=-1)], dim=-1)
    return _sdpa(q, k, v, causal)


def _sdpa(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    qt, kt, vt, options = _sdpa_arguments(q, k, v, causal)
    out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, **options)
    return out.reshape(q.shape[0], 1, q.shape[2], v.shape[-1]) if _packs(q, k) else out.transpose(1, 2)


# Read on every decode call; `unpacked_decode()` clears it for the A/B (a plain global costs nothing under compile).
_PACK_DECODE = True


@contextlib.contextmanager
def unpacked_decode() -> Iterator[None]:
    """Inside this block the "sdpa" backend runs one-query GQA calls unpacked (SDPA's enable_gqa, one work item per
    query head), as before packing existed: the "before" of scripts/gqa_decode_packing.py's A/B."""
    global _PACK_DECODE
    previous, _PACK_DECODE = _PACK_DECODE, False
    try:
        yield
    finally:
        _PACK_DECODE = previous


def _packs(q: Tensor, k: Tensor) -> bool:
    """Pack a decode step (one query position) of a GQA call on CPU, unless `unpacked_decode` is active."""
    return _PACK_DECODE and q.shape[1] == 1 and q.shape[2] > k.shape[2] and q.device.type == "cpu"


def _sdpa_arguments(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> tuple[Tensor, Tensor, Tensor, dict]:
    """(b, N, H, d) tensors → SDPA's (b, H, N, d) layout and keyword arguments.

    A GQA decode step on CPU is packed: ONE single-head call per KV head, the group's n_rep query heads as its query
    "sequence", so each KV head's keys and values stream through the kernel once per group, not once per query head
    (torch's CPU flash kernel runs a work item per (batch, head, query block), lesson 12 "Which claim holds here"):

        q (b, 1, H_kv·n_rep, d) → (b, H_kv, n_rep, d)    query head i = KV head i // n_rep, row i % n_rep
        out (b, H_kv, n_rep, d_v) → (b, 1, H_q, d_v)      exact: softmax rows are independent, no mask for one query
    """
    n_q, n_k, n_rep = q.shape[1], k.shape[1], q.shape[2] // k.shape[2]
    kt, vt = k.transpose(1, 2), v.transpose(1, 2)  # (b, H_kv, N_k, d): SDPA's layout
    if _packs(q, k):
        return q.reshape(q.shape[0], k.shape[2], n_rep, q.shape[-1]), kt, vt, {"attn_mask": None, "is_causal": False}
    # SDPA's is_causal aligns top-left, which is only right when N_q == N_k. A single query (one decode step) sees
    # every cached key; a chunk of several new queries needs the bottom-right mask spelled out.
    is_causal = causal and n_q == n_k
    mask = causal_mask(n_q, n_k, q.device) if causal and 1 < n_q < n_k else None
    qt = q.transpose(1, 2)
    if n_rep > 1 and not _SDPA_HAS_GQA:  # torch < 2.5 has no enable_gqa: copy each KV head n_rep times
        kt, vt = kt.repeat_interleave(n_rep, dim=1), vt.repeat_interleave(n_rep, dim=1)
    extra = {"enable_gqa": n_rep > 1} if _SDPA_HAS_GQA else {}
    return qt, kt, vt, {"attn_mask": mask, "is_causal": is_causal, **extra}


def sdpa_choice(q: Tensor, k: Tensor, v: Tensor, causal: bool = True) -> list[str]:
    """The SDPA kernel the "sdpa" backend runs for these tensors, as SDPA's own dispatcher picks it, one name per
    call (on CPU, 2d-wide values are split into d-wide calls). On an H100/H200 with torch 2.11 the default is cuDNN,
    not FLASH, so every "sdpa" timing names the kernel that ran. (`torch._fused_sdp_choice` is private, present
    since torch 2.0.)"""
    from torch.nn.attention import SDPBackend

    parts = v.split(q.shape[-1], dim=-1) if q.device.type == "cpu" and v.shape[-1] != q.shape[-1] else (v,)
    choices = []
    for part in parts:
        qt, kt, vt, options = _sdpa_arguments(q, k, part, causal)
        gqa = {"enable_gqa": options["enable_gqa"]} if "enable_gqa" in options else {}
        choice = torch._fused_sdp_choice(qt, kt, vt, options["attn_mask"], 0.0, options["is_causal"], **gqa)
        choices.append(SDPBackend(choice).name)
    return choices


def _math(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    n_rep = q.shape[2] // k.shape[2]
    kt = k.transpose(1, 2).repeat_interleave(n_rep, dim=1)  # (b, H_q, N_k, d): KV head i // n_rep for query head i
    vt = v.transpose(1, 2).repeat_interleave(n_rep, dim=1)
    return math_attention(q.transpose(1, 2), kt, vt, causal).transpose(1, 2)


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, block_size: int = 16) -> Tensor:
    """FlashAttention's recurrence in plain torch, for teaching: keys in blocks, never the whole (N_q, N_k) map.

    Per query row it keeps the running max m, the running sum ℓ of exp(z − m) and the running output a. A new block
    of logits z_B moves the max to m' = max(m, max z_B); what was accumulated under m is rescaled by exp(m − m'):

        ℓ ← ℓ·exp(m − m') + Σ_B exp(z_B − m')       a ← a·exp(m − m') + exp(z_B − m') V_B       out = a / ℓ

    Same layout, GQA and bottom-right mask as `attention`; equal to the math path up to rounding. (Block 0 always
    holds key 0, which every causal row sees, so m is finite after the first block.)
    """
    _check_shapes(q, k, v, causal)
    require(block_size > 0, f"block_size must be > 0 (got {block_size})")
    n_rep, d = q.shape[2] // k.shape[2], q.shape[-1]
    qt = q.transpose(1, 2)  # (b, H, N_q, d)
    kt = k.transpose(1, 2).repeat_interleave(n_rep, dim=1)  # (b, H, N_k, d)
    vt = v.transpose(1, 2).repeat_interleave(n_rep, dim=1)  # (b, H, N_k, d_v)
    visible = causal_mask(q.shape[1], k.shape[1], q.device) if causal else None  # (N_q, N_k)
    row_max = torch.full((*qt.shape[:-1], 1), -math.inf, dtype=q.dtype, device=q.device)  # m: (b, H, N_q, 1)
    row_sum = torch.zeros_like(row_max)  # ℓ
    out = torch.zeros(*qt.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)  # a: (b, H, N_q, d_v)
    for start in range(0, kt.shape[2], block_size):
        block = slice(start, start + block_size)
        z = qt @ kt[:, :, block].transpose(-2, -1) / math.sqrt(d)  # (b, H, N_q, B): one tile of logits
        if visible is not None:
            z = z.masked_fill(~visible[:, block], -math.inf)
        new_max = torch.maximum(row_max, z.amax(dim=-1, keepdim=True))  # m'
        rescale = torch.exp(row_max - new_max)  # exp(m − m'): 0 on the first block
        p = torch.exp(z - new_max)  # (b, H, N_q, B), unnormalised
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
        out = out * rescale + p @ vt[:, :, block]
        row_max = new_max
    return (out / row_sum).transpose(1, 2)  # (b, N_q, H, d_v)


_KERNELS = {"flash_attn": _flash_attn, "sdpa": _sdpa_any_value_width, "math": _math}


def _check_shapes(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> None:
    """Runs on every call: the conditions are plain comparisons, and a message is formatted only when one fails."""
    if not q.dim() == k.dim() == v.dim() == 4:
        raise ConfigError("attention takes (batch, seq, heads, head_dim) tensors")
    if not q.shape[0] == k.shape[0] == v.shape[0]:
        raise ConfigError(f"batch sizes differ: {q.shape[0]}, {k.shape[0]}, {v.shape[0]}")
    if k.shape[1] != v.shape[1]:
        raise ConfigError(f"keys and values must have the same length (got {k.shape[1]} and {v.shape[1]})")
    if k.shape[2] != v.shape[2]:
        raise ConfigError(f"keys and values must have the same heads (got {k.shape[2]} and {v.shape[2]})")
    if q.shape[-1] != k.shape[-1]:
        raise ConfigError(f"queries and keys must have the same head dim (got {q.shape[-1]}, {k.shape[-1]})")
    if q.shape[2] % k.shape[2] != 0:
        raise ConfigError(f"query heads ({q.shape[2]}) must be a multiple of KV heads ({k.shape[2]})")
    if causal and q.shape[1] > k.shape[1]:
        raise ConfigError(f"causal attention needs N_q <= N_k (got {q.shape[1]} > {k.shape[1]})")


def sdpa_kernel_support(q: Tensor, k: Tensor, v: Tensor, causal: bool = True) -> dict[str, bool]:
    """Which of SDPA's internal kernels accept these tensors, tried one at a time with `sdpa_kernel`."""
    return {name: _forced_sdpa(name, q, k, v, causal) is not None for name in SDPA_KERNELS}


def _forced_sdpa(kernel: str, q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor | None:
    """The SDPA path with only `kernel` allowed; None when that kernel refuses the tensors."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([getattr(SDPBackend, kernel)]), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each refusal explains itself in a UserWarning; None is enough here
        try:
            return _sdpa(q, k, v, causal)
        except RuntimeError:
            return None


# Shapes for backend_agreement: square causal (training), GQA, V1's 2d values, and two decode shapes (N_q < N_k).
AGREEMENT_CASES = {
    "mha": dict(n_q=64, n_k=64, h_q=4, h_kv=4, d=32, d_v=32),
    "gqa": dict(n_q=64, n_k=64, h_q=8, h_kv=2, d=32, d_v=32),
    "v1_values_2d": dict(n_q=64, n_k=64, h_q=4, h_kv=2, d=32, d_v=64),
    "decode_chunk": dict(n_q=5, n_k=64, h_q=8, h_kv=2, d=32, d_v=32),
    "decode_step": dict(n_q=1, n_k=64, h_q=8, h_kv=2, d=32, d_v=32),
}


def backend_agreement(device: str = "cpu", dtype: torch.dtype = torch.float32, seed: int = 0) -> dict:
    """Max |output − fp64 math reference| of every attention path that runs here, per case in AGREEMENT_CASES.

    Inputs are drawn in fp64 and rounded to `dtype`; the reference is the math path on those rounded numbers in
    fp64, so the differences measure the kernels' arithmetic, not input rounding. Paths: "math", "sdpa",
    "flash_attn" (when it can run), "sdpa_split_value" (for 2d values) and "sdpa:<KERNEL>" for every SDPA kernel that
    accepts the tensors. Needs no pytest, so scripts/gpu_check.sh can call it on CUDA.
    """
    generator = torch.Generator().manual_seed(seed)
    cases = {}
    for case, s in AGREEMENT_CASES.items():
        shapes = [(2, s["n_q"], s["h_q"], s["d"]), (2, s["n_k"], s["h_kv"], s["d"]), (2, s["n_k"], s["h_kv"], s["d_v"])]
        q, k, v = (torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype).to(device) for shape in shapes)
        reference = _math(q.cpu().double(), k.cpu().double(), v.cpu().double(), causal=True)
        outputs = {"math": attention(q, k, v, backend="math"), "sdpa": attention(q, k, v, backend="sdpa")}
        if flash_attn_unsupported(q, k, v) is None:
            outputs["flash_attn"] = attention(q, k, v, backend="flash_attn")
        if s["d_v"] != s["d"]:
            outputs["sdpa_split_value"] = split_value_attention(q, k, v, backend="sdpa")
        for kernel in SDPA_KERNELS:
            out = _forced_sdpa(kernel, q, k, v, causal=True)
            if out is not None:
                outputs[f"sdpa:{kernel}"] = out
        cases[case] = {name: (out.cpu().double() - reference).abs().max().item() for name, out in outputs.items()}
    name = str(dtype).removeprefix("torch.")
    return {"device": str(device), "dtype": name, "tolerance": TOLERANCE[dtype], "cases": cases}
