"""Lessons 07-08: what fixes a model (GPTConfig), how it is trained (TrainConfig), and the presets, built without torch.

    GPTConfig        a model's shape and attention kind; `matched_configs` gives lesson 07's matched variants
    TrainConfig      steps, batch, schedule, task, device: everything about a run but the model
    PRESETS          cpu-tiny, cpu-small, gpu-small: a baseline shape and a budget each
    build_configs    preset + variant + command-line overrides -> (GPTConfig, TrainConfig), every value validated
    matched          a preset and its overrides resolved once (Matched): every run of a comparison built from it
    run_config       the {"preset", "model", "train", "task"} record every checkpoint stores

Free of torch so that the command line's --help, its error messages and the stdlib track never import it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from diffattn.core.errors import require, require_positive
from diffattn.core.names import BACKENDS, TASKS
from diffattn.pure.variants import ATTENTION, VARIANTS
from diffattn.core.paths import checkpoints_dir
from diffattn.pure import accounting, variants
from diffattn.pure.accounting import swiglu_width

# SwiGLU width = ⌊8/3·d_model⌋ rounded up to a multiple of this. LLaMA rounds to 256 (4096 → 11008); at d_model = 64
# that would give 256 = 4·d_model, so small models round to 64 instead (64 → 192, 128 → 384, 768 → 2048).
FFN_MULTIPLE_OF = 64
HEAD_SCALE_SCHEDULE = "schedule"
V2_PAIRS, V2_GATES = ("difference", "sum"), ("learned", "half")
# GPTConfig fields added after checkpoints had shipped: a run config records them only when they differ from these
# defaults, so every earlier checkpoint's recorded config still equals the one the same settings build now.
LATER_FIELDS = {"v2_pair": V2_PAIRS[0], "v2_gate": V2_GATES[0]}
INIT_STD = 0.02  # GPT-2's N(0, 0.02²) for every matrix and the embedding (diffattn.model.gpt)


@dataclass
class GPTConfig:
    """Everything that fixes a model's shape. `None` fields are filled in at construction (so a config prints fully):
    n_kv_head → n_head (MHA), head_dim → d_model // n_head, ffn_hidden → swiglu_width(d_model, FFN_MULTIPLE_OF)."""

    vocab_size: int = 256
    n_layer: int = 4
    d_model: int = 128
    n_head: int = 4  # h_base, the baseline's head count, for every variant
    n_kv_head: int | None = None  # h_kv of the baseline; V1 uses h_kv/2 KV heads of (K: 2 slots of d, V: 2d)
    head_dim: int | None = None  # d, the query/key width of one head
    attention: str = variants.REFERENCE
    ffn_hidden: int | None = None
    max_seq_len: int = 256
    rope_base: float = 10000.0
    tie_embeddings: bool = True
    backend: str = "auto"
    norm_eps: float = 1e-5
    # DIFF V1 only. None: the paper's depth schedule λ_init = 0.8 − 0.6·exp(−0.3·depth); a number in (0, 1): that
    # constant in every layer (the paper's Table 6 ablation trains 0.8 and 0.5; lesson 11 repeats it in miniature).
    lambda_init: float | None = None
    # Initialisation, for lesson 08's study of V1's loss deficit (the defaults are the course's models):
    # head_scale   DIFF V1: the constant each normalised head is multiplied by; None: 1 − λ_init (the paper's);
    #              "schedule": 1 − the depth schedule's λ_init whatever lambda_init is (so the two can be varied apart)
    # subln_gain   DIFF V1: the per-head RMSNorm's gain γ at initialisation (the official code: 1)
    # out_std      every variant: the std of the attention output projection at initialisation (GPT-2's 0.02)
    # embed_scale  every variant: the token embedding is multiplied by this on the way in (Gemma: √d_model)
    head_scale: float | str | None = None
    subln_gain: float = 1.0
    out_std: float = INIT_STD
    embed_scale: float = 1.0
    # DIFF V2 only, for lesson 09's mechanism experiment (the defaults are V2):
    # v2_pair   how each pair of query heads is combined: "difference" a − σ(λ)·b (V2), or "sum" a + σ(λ)·b (the same
    #           heads, widths and gate with nothing subtracted)
    # v2_gate   "learned" σ(λ) = σ(W_λ x) per token and head (V2), or "half": σ(λ) fixed at ½, its value at W_λ = 0
    v2_pair: str = "difference"
    v2_gate: str = "learned"

    def __post_init__(self) -> None:
        require(self.attention in ATTENTION, f"attention must be one of {', '.join(ATTENTION)} (got {self.attention!r})")
        require(self.backend in BACKENDS, f"backend must be one of {', '.join(BACKENDS)} (got {self.backend!r})")
        require_positive(vocab_size=self.vocab_size, n_layer=self.n_layer, d_model=self.d_model, n_head=self.n_head,
                         max_seq_len=self.max_seq_len, rope_base=self.rope_base, norm_eps=self.norm_eps)
        if self.n_kv_head is None:
            self.n_kv_head = self.n_head
        if self.head_dim is None:
            require(self.d_model % self.n_head == 0,
                    f"d_model must be divisible by n_head when head_dim is not given (got {self.d_model} and {self.n_head})")
            self.head_dim = self.d_model // self.n_head
        if self.ffn_hidden is None:
            self.ffn_hidden = swiglu_width(self.d_model, FFN_MULTIPLE_OF)
        require_positive(n_kv_head=self.n_kv_head, head_dim=self.head_dim, ffn_hidden=self.ffn_hidden)
        require(self.n_head % self.n_kv_head == 0,
                f"n_head must be a multiple of n_kv_head (GQA groups; got {self.n_head} and {self.n_kv_head})")
        require(self.head_dim % 2 == 0, f"head_dim must be even: RoPE rotates pairs of dimensions (got {self.head_dim})")
        spec = variants.get(self.attention)
        if spec.paired_heads:
            require(self.n_head % 2 == 0 and self.n_kv_head % 2 == 0,
                    f"{self.attention} uses n_head/2 differential heads and n_kv_head/2 KV heads: both must be even "
                    f"(got n_head={self.n_head}, n_kv_head={self.n_kv_head})")
            require(self.n_head * self.head_dim == self.d_model,
                    f"{self.attention} splits d_model into n_head/2 heads of 2·head_dim: needs n_head·head_dim == "
                    f"d_model (got {self.n_head}·{self.head_dim} != {self.d_model})")
        if self.lambda_init is not None:
            require(spec.lambda_kind == "per_layer",
                    f"lambda_init sets DIFF V1's λ_init; {self.attention} has none (leave it unset)")
            require(0.0 < self.lambda_init < 1.0, f"lambda_init must lie in (0, 1) (got {self.lambda_init})")
        if spec.lambda_kind != "per_layer":
            require(self.head_scale is None and self.subln_gain == 1.0,
                    f"head_scale and subln_gain set DIFF V1's per-head norm; {self.attention} has none")
        require(self.head_scale in (None, HEAD_SCALE_SCHEDULE) or (isinstance(self.head_scale, (int, float))
                                                                 and self.head_scale > 0),
                f"head_scale must be a number > 0 or {HEAD_SCALE_SCHEDULE!r} (got {self.head_scale!r})")
        require_positive(subln_gain=self.subln_gain, out_std=self.out_std, embed_scale=self.embed_scale)
        require(self.v2_pair in V2_PAIRS and self.v2_gate in V2_GATES,
                f"v2_pair is one of {', '.join(V2_PAIRS)} and v2_gate one of {', '.join(V2_GATES)} "
                f"(got {self.v2_pair!r}, {self.v2_gate!r})")
        require(spec.lambda_kind == "gate" or (self.v2_pair, self.v2_gate) == (V2_PAIRS[0], V2_GATES[0]),
                f"v2_pair and v2_gate change DIFF V2's pairs; {self.attention} has none")


def matched_configs(base: GPTConfig) -> dict[str, GPTConfig]:
    """The models lesson 07 compares, one per registered variant that fits the baseline (h_base heads of d, h_kv KV
    heads): a kind as it is, a derived variant with its kind's attention and its heads multiplied (`baseline_2h`, the
    same-query-width baseline for V2: 2·h_base query heads of d over the same KV heads)."""
    return {name: matched_config(base, name) for name in VARIANTS if variants.fits(name, base.n_head, base.n_kv_head)}


def matched_config(base: GPTConfig, variant: str) -> GPTConfig:
    """One of `matched_configs`: the variant's kind, with its heads multiplied (every value checked)."""
    spec = variants.get(variant)
    return replace(base, attention=spec.kind_name, n_head=base.n_head * spec.heads_factor,
                   n_kv_head=base.n_kv_head * spec.kv_factor)

def accounting_model(model: GPTConfig, variant: str) -> accounting.ModelConfig:
    """Lesson 04's description of the baseline that `variant`'s model was built from (`matched_configs`): a derived
    variant's model has its factors times its baseline's heads; DIFF settings (λ_init, head scale) do not change any count."""
    spec = variants.get(variant)
    return accounting.ModelConfig(hidden=model.d_model, heads=model.n_head // spec.heads_factor, head_dim=model.head_dim,
                                  layers=model.n_layer, kv_heads=model.n_kv_head // spec.kv_factor, ffn=model.ffn_hidden, vocab=model.vocab_size)


@dataclass
class TrainConfig:
    """How to train (the model's shape is a GPTConfig). `batch_size` is global: sequences per optimizer step."""

    variant: str = variants.REFERENCE
    task: str = "text"
    steps: int = 100
    batch_size: int = 16
    grad_accum: int = 1
    seq_len: int = 128
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 10
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    eval_every: int = 25
    eval_sequences: int = 32
    checkpoint_every: int = 50
    seed: int = 0
    device: str = "cpu"
    bf16: bool = False  # bf16 autocast (GPU presets; on CPU for gpu_check.sh's rehearsal); weights and AdamW stay fp32
    compile: bool = False
    data: str | None = None  # --data FILE or folder for the text task (None: the built-in corpus)
    task_options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Preset:
    model: GPTConfig  # the baseline's shape (n_head = h_base); the variant is applied by matched_configs
    train: TrainConfig
    note: str


PRESETS = {
    "cpu-tiny": Preset(
        GPTConfig(n_layer=2, d_model=64, n_head=4, n_kv_head=2, max_seq_len=128),
        TrainConfig(steps=150, batch_size=16, seq_len=128, lr=3e-3, warmup_steps=15, eval_every=25, eval_sequences=32,
                    checkpoint_every=50),
        "CI and lessons 08-11: every variant in seconds on 2 CPU cores"),
    "cpu-small": Preset(
        GPTConfig(n_layer=4, d_model=128, n_head=4, n_kv_head=2, max_seq_len=256),
        TrainConfig(steps=300, batch_size=16, seq_len=128, lr=2e-3, warmup_steps=30, eval_every=25,
                    eval_sequences=64, checkpoint_every=100),
        "a laptop: the four variants x 3 seeds in about a quarter of an hour on 2 cores"),
    "cpu-recall": Preset(
        GPTConfig(n_layer=2, d_model=64, n_head=4, n_kv_head=2, max_seq_len=128),
        TrainConfig(task="rebind", steps=2000, batch_size=32, seq_len=64, lr=3e-3, warmup_steps=100, eval_every=100,
                    eval_sequences=256, checkpoint_every=500),
        "lesson 09's low-floor retrieval tasks: cpu-tiny's shape, 2,000 steps, a learning curve every 100"),
    "gpu-small": Preset(
        GPTConfig(n_layer=12, d_model=768, n_head=12, n_kv_head=12, max_seq_len=2048),
        TrainConfig(steps=1200, batch_size=32, seq_len=2048, lr=1.5e-3, warmup_steps=120, eval_every=100,
                    eval_sequences=64, checkpoint_every=400, device="cuda", bf16=True, compile=True),
        "one H100/H200: GPT-2-small width at context 2048, bf16, compiled"),
}


def build_configs(preset: str, variant: str, lambda_init: float | None = None,
                  **overrides: Any) -> tuple[GPTConfig, TrainConfig]:
    """The preset's configs with the variant applied and command-line overrides (None = keep the preset's value);
    `lambda_init` is DIFF V1's constant λ_init (None: the depth schedule)."""
    require(preset in PRESETS, f"preset must be one of {', '.join(PRESETS)} (got {preset!r})")
    variants.get(variant)  # one line naming the registered variants otherwise
    p = PRESETS[preset]
    train = dataclasses.replace(p.train, variant=variant,
                                **{k: v for k, v in overrides.items() if v is not None})
    check_train_config(train)
    model = dataclasses.replace(matched_config(p.model, variant), lambda_init=lambda_init)  # checks lambda_init
    require(train.seq_len <= model.max_seq_len,
            f"--seq-len {train.seq_len} is longer than the model supports (max_seq_len {model.max_seq_len} "
            f"in preset {preset})")
    return model, train



@dataclass(frozen=True)
class Matched:
    """What every run of a matched comparison shares, resolved once from a preset and its overrides: the baseline's
    shape and the training budget (task, steps, batches, schedule, device). `configs` gives one run's pair."""

    preset: str
    model: GPTConfig  # the baseline's shape; each variant's is built from it (matched_configs)
    train: TrainConfig  # every run's, but the variant and the seed
    overrides: dict[str, Any] = field(default_factory=dict)  # what the command line changed, as a record says it

    def configs(self, variant: str, seed: int | None = None,
                lambda_init: float | None = None) -> tuple[GPTConfig, TrainConfig]:
        model = dataclasses.replace(matched_config(self.model, variant), lambda_init=lambda_init)
        return model, dataclasses.replace(self.train, variant=variant, **({} if seed is None else {"seed": seed}))


def matched(preset: str, **overrides: Any) -> Matched:
    """The preset with its overrides (None = keep the preset's value), every value validated once, here."""
    _, train = build_configs(preset, variants.REFERENCE, **overrides)
    return Matched(preset, PRESETS[preset].model, train, {k: v for k, v in overrides.items() if v is not None})

def check_train_config(c: TrainConfig) -> None:
    require(c.task in TASKS, f"task must be one of {', '.join(TASKS)} (got {c.task!r})")
    for name in ("steps", "batch_size", "grad_accum", "seq_len", "eval_every", "eval_sequences", "checkpoint_every"):
        require(getattr(c, name) > 0, f"{name.replace('_', '-')} must be > 0 (got {getattr(c, name)})")
    require(math.isfinite(c.lr) and c.lr > 0, f"lr must be a finite number > 0 (got {c.lr})")
    require(c.warmup_steps >= 0 and 0 <= c.min_lr_ratio <= 1, "warmup-steps must be >= 0 and min-lr-ratio in [0, 1]")
    require(c.task == "text" or c.steps > c.warmup_steps,
            f"a retrieval run's learning curve is read against its null after warmup: steps ({c.steps}) must exceed "
            f"warmup-steps ({c.warmup_steps})")
    require(c.device in ("cpu", "cuda") or c.device.startswith("cuda:"), f"device must be cpu or cuda (got {c.device!r})")
    if c.device.startswith("cuda"):
        import torch  # only here: configs are built without torch everywhere else

        require(torch.cuda.is_available(), f"device {c.device} needs a CUDA GPU and none is visible "
                                           f"(pass --device cpu to run this preset on CPU, slowly)")


def parse_task_options(items: list[str]) -> dict[str, int | str]:
    """["value_len=3", "pad=end"] → {"value_len": 3, "pad": "end"}: an integer, or a word for the options that name a
    choice (pad, ask); one-line error for anything else (the task itself then rejects options it does not have, or
    values that leave its null undefined)."""
    options: dict[str, int | str] = {}
    for item in items:
        key, sep, value = (part.strip() for part in item.partition("="))
        number = value.lstrip("-").isdigit()
        require(bool(sep) and key.isidentifier() and (number or value.isidentifier()),
                f"--task-option takes KEY=INTEGER or KEY=WORD, e.g. value_len=3 or pad=end (got {item!r})")
        options[key] = int(value) if number else value
    return options


def default_out(preset: str, task: str, variant: str, seed: int = 0) -> Path:
    """outputs/checkpoints/<preset>/<task>/<variant>/ (seed 0) or …/<variant>-seed<S>/ (paths.checkpoints_dir)."""
    return checkpoints_dir() / preset / task / (variant if seed == 0 else f"{variant}-seed{seed}")


def run_config(preset: str, model: GPTConfig, train: TrainConfig) -> dict[str, Any]:
    """The config a checkpoint records: {"model", "train", "task"} (JSON-serialisable)."""
    fields = {k: v for k, v in dataclasses.asdict(model).items() if LATER_FIELDS.get(k, object()) != v}
    return {"preset": preset, "model": fields, "train": dataclasses.asdict(train),
            "task": {"name": train.task, "data": train.data, "options": train.task_options}}


