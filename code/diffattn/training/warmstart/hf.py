"""Lesson 13: the course's models in and out of Hugging Face transformers, logits kept (a dev-only extra,
`pip install -e '.[hf]'` (transformers with DiffLlama and `rope_parameters`, i.e. version 5; imported inside the functions).

    to_hf(model)         course baseline → LlamaForCausalLM, course DIFF V1 → DiffLlamaForCausalLM
    from_hf(net)         LlamaForCausalLM → course baseline (a starting point for `convert`), DiffLlama → course V1
    hf_config(...)       the Llama / DiffLlama config of a course GPTConfig (scripts/diffllama_gap.py uses it too)
    logit_gap(...)       the largest |Δ logit| between a course model and a transformers one on the same tokens

Both directions copy tensors, reorder rows and fold constants; nothing is retrained. What moves, and why:

    names        tok_emb ↔ model.embed_tokens, norm ↔ model.norm, lm_head (tied ↔ tie_word_embeddings); per layer
                 attn_norm / ffn_norm ↔ input_layernorm / post_attention_layernorm, ffn.w_gate / w_up / w_down ↔
                 mlp.gate_proj / up_proj / down_proj, attn.q/k/v_proj ↔ self_attn.q/k/v_proj, out_proj ↔ o_proj.
                 Same arithmetic: RMSNorm (eps = rms_norm_eps), SiLU-gated MLP, 1/√d scores, no biases, the vocab
                 as it is (neither side pads it), RoPE θ_i = base^(−2i/d).
    precision    What transformers computes in fp32 whatever the model's dtype: the RoPE angles p·θ_i (the course
                 forms them in fp64 and rounds once, so that gap grows with position p), RMSNorm's statistics, and
                 DiffLlama's λ dot products. With those in fp64 too, an fp64 export agrees to 1e-12; an fp32 export
                 also keeps the rounding of what it folds into one weight (V1's γ into W_O, embed_scale into the
                 embedding), a few 1e-8 of the logits. tests/test_13_hf.py measures each.
    RoPE layout  the course rotates interleaved pairs (2i, 2i+1), transformers the halves (i, d/2 + i). HF channel
                 i of a query or key head is course channel 2i, HF channel d/2 + i is 2i + 1: a row permutation of
                 W_Q and W_K inside every head, which leaves every q·k as it was.
    V1 heads     DiffLlama's num_attention_heads is the course's n_head (two d-wide heads per differential head). It
                 orders query heads [every q1 | every q2], KV heads [every k1 | every k2] and value halves likewise;
                 the course interleaves (q1_i, q2_i), (k1_g, k2_g) and keeps a group's 2d value together. Another row
                 permutation (of W_Q, W_K, W_V). λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init with the same
                 four vectors and the same schedule λ_init = 0.8 − 0.6·exp(−0.3·layer), 0-based, on both sides.
    V1 norm      DiffLlama's groupnorm has no gain (the first official release); the course's subln has a 2d gain γ
                 (the official code now). out = W_O((1 − λ_init)·γ ⊙ RMSNorm(head)), so export folds γ (and a
                 head_scale other than 1 − λ_init) into W_O's columns; import sets γ = 1. Its eps is rms_norm_eps,
                 the course's is 1e-5: a V1 exports only with norm_eps = 1e-5. (One more difference, outside fp32:
                 DiffLlama rounds λ to the activations' dtype, the course keeps it in fp32 under bf16.)
    embed_scale  Llama has none: export multiplies the embedding by it, and with a tied head divides the final
                 norm's gain by it, so x_0 and the logits are unchanged.

Refused with one line: a DIFF V2 model (transformers has no class for it), a V1 with a constant lambda_init
(DiffLlama's λ_init is always the schedule), and on import any other model_type, rope scaling, biases, an activation
other than SiLU, or a DiffLlama whose heads·head_dim ≠ hidden_size (the course's V1 needs it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from diffattn.pure import variants
from diffattn.config import INIT_STD, GPTConfig
from diffattn.core.errors import ConfigError, one_line, require
from diffattn.model.gpt import GPT

HF_CLASSES = {"baseline": ("LlamaForCausalLM", "llama"), "diff_v1": ("DiffLlamaForCausalLM", "diffllama")}
V1_SUBLN_EPS = 1e-5  # diffattn.nn.attention.DiffAttentionV1's subln
CHECK_SEQUENCES, CHECK_SEED = 4, 1234
# A command's check, as a share of the largest |logit|, fp32 on CHECK_SEQUENCES × ≤128 positions. The gap there is
# rounding only (fp64 everywhere: 1e-12, see "precision" above): 1.3e-6 on the shipped baseline and 2.9e-6 on the
# shipped V1 under the default, AVX2 and AVX-512 kernels (growing with position, through the fp32 RoPE angles), so
# 1e-5 leaves a margin of 3; the nearest wrong mapping in tests/test_13_hf.py misses by 7.8e-3 of it.
AGREEMENT = 1e-5


def require_transformers() -> Any:
    """The transformers module, or a one-line ConfigError saying how to get it."""
    try:
        import transformers
        from transformers import DiffLlamaForCausalLM, LlamaForCausalLM  # noqa: F401  (both must exist)
    except ImportError:
        raise ConfigError("this needs transformers (a dev-only extra): pip install -e '.[hf]'") from None
    return transformers


def hf_config(transformers: Any, model: GPTConfig, kind: str) -> Any:
    """The LlamaConfig ("llama") or DiffLlamaConfig ("diffllama") with the course config's shapes and numbers."""
    common = dict(vocab_size=model.vocab_size, hidden_size=model.d_model, intermediate_size=model.ffn_hidden,
                  num_hidden_layers=model.n_layer, num_attention_heads=model.n_head,
                  num_key_value_heads=model.n_kv_head, head_dim=model.head_dim,
                  max_position_embeddings=model.max_seq_len, rms_norm_eps=model.norm_eps, initializer_range=INIT_STD,
                  tie_word_embeddings=model.tie_embeddings,
                  rope_parameters={"rope_type": "default", "rope_theta": float(model.rope_base)},
                  attention_dropout=0.0, attention_bias=False, hidden_act="silu", bos_token_id=None,
                  eos_token_id=None, pad_token_id=None)
    if kind == "llama":
        return transformers.LlamaConfig(**common, mlp_bias=False)
    return transformers.DiffLlamaConfig(**common, lambda_std_dev=0.1)


def _rope_rows(d: int) -> Tensor:
    """HF row j of a d-wide head is course row rope_rows[j]: (0, 2, 4, …, 1, 3, 5, …)."""
    return torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))


def _head_rows(heads: int, d: int, paired: bool, rope: bool) -> Tensor:
    """For a projection of `heads` d-wide heads, the course row behind each HF row. `paired`: HF's head order
    [every first of a pair | every second] against the course's interleaved pairs (DIFF V1)."""
    order = torch.arange(heads)
    if paired:
        order = torch.cat((order[0::2], order[1::2]))  # HF head j < heads/2: course 2j; else 2(j − heads/2) + 1
    within = _rope_rows(d) if rope else torch.arange(d)
    return (order[:, None] * d + within[None, :]).flatten()


def _layout(config: GPTConfig) -> dict[str, tuple[str, Tensor | None]]:
    """HF key → (course key, the course row behind each HF row, or None for the same rows)."""
    paired, d = variants.get(config.attention).paired_heads, config.head_dim
    keys: dict[str, tuple[str, Tensor | None]] = {"model.embed_tokens.weight": ("tok_emb.weight", None),
                                                  "model.norm.weight": ("norm.weight", None),
                                                  "lm_head.weight": ("lm_head.weight", None)}
    for i in range(config.n_layer):
        hf, ours = f"model.layers.{i}.", f"blocks.{i}."
        q_rows, k_rows = _head_rows(config.n_head, d, paired, True), _head_rows(config.n_kv_head, d, paired, True)
        v_rows = _head_rows(config.n_kv_head, d, True, False) if paired else None  # V1: value halves, no RoPE
        keys |= {hf + "input_layernorm.weight": (ours + "attn_norm.weight", None),
                 hf + "post_attention_layernorm.weight": (ours + "ffn_norm.weight", None),
                 hf + "mlp.gate_proj.weight": (ours + "ffn.w_gate.weight", None),
                 hf + "mlp.up_proj.weight": (ours + "ffn.w_up.weight", None),
                 hf + "mlp.down_proj.weight": (ours + "ffn.w_down.weight", None),
                 hf + "self_attn.q_proj.weight": (ours + "attn.q_proj.weight", q_rows),
                 hf + "self_attn.k_proj.weight": (ours + "attn.k_proj.weight", k_rows),
                 hf + "self_attn.v_proj.weight": (ours + "attn.v_proj.weight", v_rows),
                 hf + "self_attn.o_proj.weight": (ours + "attn.out_proj.weight", None)}
        if paired:
            keys |= {hf + f"self_attn.{name}": (ours + f"attn.{name}", None)
                     for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")}
    return keys


def check_exportable(model: GPT) -> None:
    c = model.config
    require(c.attention in HF_CLASSES, f"transformers has a class for the baseline (Llama) and DIFF V1 (DiffLlama); "
                                       f"this model is {c.attention}")
    if variants.get(c.attention).paired_heads:
        require(c.lambda_init is None, f"DiffLlama's λ_init is always the depth schedule; this V1 uses a constant "
                                       f"lambda_init={c.lambda_init}")
        require(c.norm_eps == V1_SUBLN_EPS, f"DiffLlama's head norm uses rms_norm_eps, the course's {V1_SUBLN_EPS}: "
                                            f"a V1 exports only with norm_eps={V1_SUBLN_EPS} (got {c.norm_eps})")


@torch.no_grad()
def to_hf(model: GPT) -> Any:
    """The LlamaForCausalLM (baseline) or DiffLlamaForCausalLM (DIFF V1) with `model`'s logits (eval mode, in the
    model's dtype and at least fp32: an fp64 model folds its constants in fp64)."""
    transformers = require_transformers()
    check_exportable(model)
    c = model.config
    class_name, kind = HF_CLASSES[c.attention]
    dtype = torch.promote_types(next(model.parameters()).dtype, torch.float32)
    state = {k: v.detach().to(dtype) for k, v in model.state_dict().items()}
    hf_state = {hf: state[ours] if rows is None else state[ours][rows] for hf, (ours, rows) in _layout(c).items()}
    s = c.embed_scale  # x_0 = s·E[token]: scale the table; a tied head then reads s·E, which the final gain undoes
    hf_state["model.embed_tokens.weight"] = hf_state["model.embed_tokens.weight"] * s
    if c.tie_embeddings:
        hf_state["model.norm.weight"] = hf_state["model.norm.weight"] / s
        hf_state["lm_head.weight"] = hf_state["model.embed_tokens.weight"]
    else:
        hf_state["lm_head.weight"] = state["lm_head.weight"]
    for i, block in enumerate(model.blocks if variants.get(c.attention).paired_heads else ()):
        # W_O ((1 − norm_λ) γ ⊙ n) = (W_O diag(γ_tiled · ratio)) ((1 − λ_init) n), γ tiled over the heads
        attn = block.attn
        ratio = (1.0 - attn.norm_lambda) / (1.0 - attn.lambda_init)  # 1 unless head_scale set it apart
        column_scale = attn.subln.weight.to(dtype).repeat(attn.num_heads) * ratio
        hf_state[f"model.layers.{i}.self_attn.o_proj.weight"] = state[f"blocks.{i}.attn.out_proj.weight"] * column_scale
    net = getattr(transformers, class_name)(hf_config(transformers, c, kind)).to(dtype)
    missing, unexpected = net.load_state_dict(hf_state, strict=False)
    require(not missing and not unexpected, f"transformers' {class_name} has other keys than expected: missing "
                                            f"{sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]}")
    return net.eval()


def _import_config(hf: Any) -> GPTConfig:
    """The course GPTConfig of a transformers Llama / DiffLlama config; ConfigError for what the course cannot hold."""
    kinds = {kind: attention for attention, (_, kind) in HF_CLASSES.items()}
    require(hf.model_type in kinds, f"import reads model_type llama or diffllama (got {hf.model_type!r})")
    rope = dict(getattr(hf, "rope_parameters", None) or {})
    require(rope.get("rope_type", "default") == "default", f"the course's RoPE has no scaling (rope_type "
                                                           f"{rope.get('rope_type')!r})")
    require(hf.hidden_act == "silu", f"the course's MLP is SwiGLU with SiLU (hidden_act {hf.hidden_act!r})")
    require(not hf.attention_bias and not getattr(hf, "mlp_bias", False), "the course's layers have no biases")
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    attention = kinds[hf.model_type]
    if variants.get(attention).paired_heads:
        require(hf.num_attention_heads * head_dim == hf.hidden_size and hf.rms_norm_eps == V1_SUBLN_EPS,
                f"the course's V1 needs heads·head_dim = hidden_size and rms_norm_eps {V1_SUBLN_EPS} (got "
                f"{hf.num_attention_heads}·{head_dim} vs {hf.hidden_size}, {hf.rms_norm_eps})")
    return GPTConfig(vocab_size=hf.vocab_size, n_layer=hf.num_hidden_layers, d_model=hf.hidden_size,
                     n_head=hf.num_attention_heads, n_kv_head=hf.num_key_value_heads, head_dim=head_dim,
                     attention=attention, ffn_hidden=hf.intermediate_size, max_seq_len=hf.max_position_embeddings,
                     rope_base=float(rope.get("rope_theta", 10000.0)), tie_embeddings=bool(hf.tie_word_embeddings),
                     norm_eps=hf.rms_norm_eps)


@torch.no_grad()
def from_hf(net: Any) -> GPT:
    """The course GPT (baseline from Llama, DIFF V1 from DiffLlama; eval mode, fp32) with `net`'s logits."""
    config = _import_config(net.config)
    hf_state = {k: v.detach().float() for k, v in net.state_dict().items()}
    model = GPT(config)
    state = {k: v.clone() for k, v in model.state_dict().items()}  # fills subln.weight (γ = 1) and any tied alias
    for hf, (ours, rows) in _layout(config).items():
        if hf == "lm_head.weight" and config.tie_embeddings:
            continue  # the embedding, already copied
        require(hf in hf_state, f"the {net.config.model_type} model has no {hf}")
        if rows is None:
            state[ours] = hf_state[hf].clone()
        else:
            state[ours][rows] = hf_state[hf]  # course row rows[j] ← HF row j
    if config.tie_embeddings:
        state["lm_head.weight"] = state["tok_emb.weight"]
    model.load_state_dict(state)
    return model.eval()


@torch.no_grad()
def logit_gap(model: GPT, net: Any, tokens: Tensor) -> dict[str, float]:
    """max |Δ logit| between the course `model` and the transformers `net` on `tokens` (b, N), and max |logit|
    (taken in fp64, so that fp64 models are compared to their own precision)."""
    ours = model.eval()(tokens).double()
    theirs = net.eval()(input_ids=tokens, use_cache=False).logits.double()
    return {"max_abs_logit_gap": float((ours - theirs).abs().max()), "max_abs_logit": float(ours.abs().max())}



def check_tokens(config: GPTConfig) -> Tensor:
    """The tokens a command compares both models on: random ids (any vocabulary), fixed seed, up to 128 positions."""
    generator = torch.Generator().manual_seed(CHECK_SEED)
    return torch.randint(0, config.vocab_size, (CHECK_SEQUENCES, min(128, config.max_seq_len)), generator=generator)


def _require_agreement(gap: dict[str, float], what: str) -> None:
    """fp32 rounding moves logits by ~1e-6 of their size, a mapping error by ~1e-2 or more: refuse the second."""
    require(gap["max_abs_logit_gap"] <= AGREEMENT * max(1.0, gap["max_abs_logit"]),
            f"{what}: the logits differ by {gap['max_abs_logit_gap']:.3g} (largest |logit| "
            f"{gap['max_abs_logit']:.3g}), so this transformers version maps a field differently; nothing written")


def export_folder(src: Path, out: Path) -> dict[str, Any]:
    """Write the checkpoint `src` (baseline or V1) as a transformers model folder `out` (save_pretrained), reload it
    and compare logits; into a temporary sibling first, renamed to `out` only when it agrees."""
    from diffattn.training.checkpoint import load_model

    transformers = require_transformers()
    require(not out.exists() or (out.is_dir() and not any(out.iterdir())), f"{out} exists and is not empty: choose "
                                                                           f"another --out or remove it")
    model, _ = load_model(src)
    check_exportable(model)
    transformers.logging.set_verbosity_error()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        to_hf(model).save_pretrained(tmp)
        cls = getattr(transformers, HF_CLASSES[model.config.attention][0])
        gap = logit_gap(model, cls.from_pretrained(tmp, local_files_only=True, dtype=torch.float32),
                        check_tokens(model.config))
        _require_agreement(gap, f"{cls.__name__} in {out}")
        for path in (tmp, *tmp.iterdir()):  # mkdtemp's 0700 (and any 0600 file): readable like every other output
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.replace(tmp, out)  # a directory: atomic, and over an empty `out` too
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"class": cls.__name__, **gap}


def import_folder(src: Path, out: Path) -> dict[str, Any]:
    """Read a transformers Llama / DiffLlama folder `src` (local files only) and write it as a course weights-only
    checkpoint `out` (baseline / V1) whose config names the byte-level text task, so `convert` can start from it."""
    from diffattn.training.checkpoint import save_weights
    from diffattn.config import TrainConfig, run_config

    transformers = require_transformers()
    require(src.is_dir(), f"{src} does not exist or is not a folder")
    require(not (out / "model.safetensors").exists() and not (out / "checkpoint.pt").exists(),
            f"{out} already holds a model: choose another --out or remove it")
    transformers.logging.set_verbosity_error()
    try:
        hf = transformers.AutoConfig.from_pretrained(src, local_files_only=True)
        config = _import_config(hf)  # refuses what the course cannot hold before reading any weights
        net, info = transformers.AutoModelForCausalLM.from_pretrained(
            src, config=hf, local_files_only=True, dtype=torch.float32, output_loading_info=True)
    except ConfigError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{src} is not a readable transformers model folder ({one_line(exc)})") from None
    require(not info["missing_keys"], f"{src} lacks weights {sorted(info['missing_keys'])[:3]}: transformers would "
                                      f"draw them at random")
    model = from_hf(net)
    gap = logit_gap(model, net, check_tokens(config))
    _require_agreement(gap, f"the course model read from {src}")
    train = TrainConfig(variant=config.attention, seq_len=min(TrainConfig.seq_len, config.max_seq_len))
    record = run_config("imported", config, train) | {
        "imported_from": {"path": str(src), "model_type": hf.model_type, "transformers": transformers.__version__,
                          "check": gap}}
    save_weights(out, model, record)
    return {"attention": config.attention, **gap}
