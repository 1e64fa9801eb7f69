"""Lesson 08: train one variant of the lesson-07 GPT on one task, on CPU, one GPU, or several with torchrun.

    python -m diffattn train --preset cpu-tiny --attention diff_v2 [--task text] [--out DIR] [--resume] [--seed 0]
    torchrun --standalone --nproc_per_node=2 -m diffattn train --preset cpu-tiny --attention diff_v1

One optimizer step, for a global batch of B sequences of T tokens split over W ranks and A accumulation micro-steps:

    x, y     = task.batch(B, T, data_rng)               every rank draws the same global batch, then keeps its rows
    n        = #{targets ≠ −100}                        over the whole global batch (text: B·T)
    for each of rank r's A micro-batches (B/(W·A) rows):
        loss_m = Σ_tokens CE(model(x_m), y_m) · W / n    summed, not averaged: so every (W, A) gives the same gradient
        loss_m.backward()                               DDP all-reduces (averages over W) on the last micro-step only
    g        = clip(g, max_norm)                        global-norm gradient clipping
    θ        = AdamW(θ, g, lr(step))                     decoupled weight decay on matrices, none on norms and λ
    lr(step) = lr_max · step/warmup                      then cosine from lr_max down to min_lr_ratio · lr_max

Every number the lesson quotes comes from metrics.jsonl (diffattn.checkpoint), which this loop writes on rank 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from diffattn import checkpoint
from diffattn.data import IGNORE_INDEX, TASKS, VOCAB_SIZE, make_task
from diffattn.errors import ConfigError, require
from diffattn.model import GPT, GPTConfig, matched_configs
from diffattn.paths import outputs_dir
from diffattn.pure import accounting

ATTENTION = ("baseline", "baseline_2h", "diff_v1", "diff_v2")  # lesson 07's four matched models
LABELS = accounting.LABELS


@dataclass
class TrainConfig:
    """How to train (the model's shape is a GPTConfig). `batch_size` is global: sequences per optimizer step."""

    variant: str = "baseline"
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
    bf16: bool = False  # bf16 autocast (CUDA only); parameters and optimizer state stay fp32
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
    "gpu-small": Preset(
        GPTConfig(n_layer=12, d_model=768, n_head=12, n_kv_head=12, max_seq_len=2048),
        TrainConfig(steps=1200, batch_size=32, seq_len=2048, lr=1.5e-3, warmup_steps=120, eval_every=100,
                    eval_sequences=64, checkpoint_every=400, device="cuda", bf16=True, compile=True),
        "one H100/H200: GPT-2-small width at context 2048, bf16, compiled"),
}


class TrainingDiverged(ConfigError):
    """The loss became NaN or Inf; raised before the bad step touches the weights or any checkpoint."""


# ------------------------------------------------------------------------------------------------------ setup


def build_configs(preset: str, variant: str, lambda_init: float | None = None,
                  **overrides: Any) -> tuple[GPTConfig, TrainConfig]:
    """The preset's configs with the variant applied and command-line overrides (None = keep the preset's value);
    `lambda_init` is DIFF V1's constant λ_init (None: the depth schedule)."""
    require(preset in PRESETS, f"preset must be one of {', '.join(PRESETS)} (got {preset!r})")
    require(variant in ATTENTION, f"attention must be one of {', '.join(ATTENTION)} (got {variant!r})")
    p = PRESETS[preset]
    train = dataclasses.replace(p.train, variant=variant,
                                **{k: v for k, v in overrides.items() if v is not None})
    check_train_config(train)
    model = dataclasses.replace(matched_configs(p.model)[variant], lambda_init=lambda_init)  # checks lambda_init
    require(train.seq_len <= model.max_seq_len,
            f"--seq-len {train.seq_len} is longer than the model supports (max_seq_len {model.max_seq_len} "
            f"in preset {preset})")
    return model, train


def check_train_config(c: TrainConfig) -> None:
    require(c.task in TASKS, f"task must be one of {', '.join(TASKS)} (got {c.task!r})")
    for name in ("steps", "batch_size", "grad_accum", "seq_len", "eval_every", "eval_sequences", "checkpoint_every"):
        require(getattr(c, name) > 0, f"{name.replace('_', '-')} must be > 0 (got {getattr(c, name)})")
    require(math.isfinite(c.lr) and c.lr > 0, f"lr must be a finite number > 0 (got {c.lr})")
    require(c.warmup_steps >= 0 and 0 <= c.min_lr_ratio <= 1, "warmup-steps must be >= 0 and min-lr-ratio in [0, 1]")
    require(c.device in ("cpu", "cuda") or c.device.startswith("cuda:"), f"device must be cpu or cuda (got {c.device!r})")
    if c.device.startswith("cuda"):
        require(torch.cuda.is_available(), f"device {c.device} needs a CUDA GPU and none is visible "
                                           f"(pass --device cpu to run this preset on CPU, slowly)")
    require(not c.bf16 or c.device.startswith("cuda"), "bf16 autocast is for CUDA; CPU training runs in fp32")


def default_out(preset: str, task: str, variant: str, seed: int = 0) -> Path:
    """outputs/checkpoints/<preset>/<task>/<variant>/ (seed 0) or …/<variant>-seed<S>/."""
    return outputs_dir() / "checkpoints" / preset / task / (variant if seed == 0 else f"{variant}-seed{seed}")


def run_config(preset: str, model: GPTConfig, train: TrainConfig) -> dict[str, Any]:
    """The config a checkpoint records: {"model", "train", "task"} (JSON-serialisable)."""
    return {"preset": preset, "model": dataclasses.asdict(model), "train": dataclasses.asdict(train),
            "task": {"name": train.task, "data": train.data, "options": train.task_options}}


class WarmupCosine:
    """lr multiplier: linear warmup over `warmup` steps, then cosine from 1 down to `floor` at `total` steps.

    A class, not a lambda, so LambdaLR.state_dict() records it and --resume restores it."""

    def __init__(self, warmup: int, total: int, floor: float):
        self.warmup, self.total, self.floor = warmup, total, floor

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        return self.floor + (1 - self.floor) * 0.5 * (1 + math.cos(math.pi * progress))


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on matrices (projections, embedding); none on norm weights and on λ (V1's vectors, V2's W_λ),
    which decay would pull towards λ = λ_init (V1) or σ(λ) = ½ (V2) instead of towards "no second map"."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() < 2 or "lambda" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: nn.Module, c: TrainConfig) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    fused = c.device.startswith("cuda")  # one kernel for all parameters on GPU; the for-each path on CPU
    optimizer = torch.optim.AdamW(parameter_groups(model, c.weight_decay), lr=c.lr, betas=(c.beta1, c.beta2),
                                  fused=fused)
    schedule = WarmupCosine(c.warmup_steps, c.steps, c.min_lr_ratio)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def training_flops_per_token(model: GPTConfig, variant: str, seq_len: int) -> int:
    """Forward + backward ≈ 3 × forward FLOPs per token (lesson 04's accounting; causal attention counts T/2 keys)."""
    base = dataclasses.replace(model, attention="baseline", lambda_init=None,
                               n_head=model.n_head // 2 if variant == "baseline_2h" else model.n_head)
    config = accounting.ModelConfig(hidden=base.d_model, heads=base.n_head, head_dim=base.head_dim,
                                    layers=base.n_layer, kv_heads=base.n_kv_head, ffn=base.ffn_hidden,
                                    vocab=base.vocab_size)
    return 3 * accounting.forward_flops_per_token(config, variant, seq_len)["total"]


# ------------------------------------------------------------------------------------------------ distributed


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    distributed: bool = False

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str) -> Dist:
    """torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; without them this is a single process. Under torchrun even one
    rank joins a process group and runs DDP, so `--nproc_per_node=1` exercises the NCCL path on a one-GPU machine."""
    if "RANK" not in os.environ:
        return Dist()
    import torch.distributed as dist

    if device.startswith("cuda"):
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return Dist(dist.get_rank(), dist.get_world_size(), distributed=True)


def all_reduce_sum(value: Tensor, d: Dist) -> Tensor:
    if d.distributed:
        import torch.distributed as dist

        dist.all_reduce(value)
    return value


# ----------------------------------------------------------------------------------------------- measurement


@torch.no_grad()
def evaluate(model: GPT, inputs: Tensor, targets: Tensor, micro_batch: int, autocast) -> dict[str, Any]:
    """Validation loss (mean over counted targets), and the λ each DIFF layer applied: V1's scalar λ per layer,
    V2's σ(λ_t) averaged over heads and validation tokens per layer."""
    model.eval()
    sigmas: list[list[float]] = [[] for _ in model.blocks]
    hooks = [block.attn.lambda_proj.register_forward_hook(
        lambda _m, _i, out, i=i: sigmas[i].append(torch.sigmoid(out.float()).mean().item()))
        for i, block in enumerate(model.blocks) if hasattr(block.attn, "lambda_proj")]
    total, count = 0.0, 0
    try:
        for start in range(0, len(inputs), micro_batch):
            x = inputs[start:start + micro_batch]
            y = targets[start:start + micro_batch]
            with autocast():
                logits = model(x)
            total += F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX,
                                     reduction="sum").item()
            count += int((y != IGNORE_INDEX).sum())
    finally:
        for hook in hooks:
            hook.remove()
    model.train()
    out: dict[str, Any] = {"val_loss": total / count}
    if model.config.attention == "diff_v1":
        out["lambda"] = [block.attn.lambda_full().item() for block in model.blocks]
    if hooks:
        out["sigma_lambda"] = [sum(s) / len(s) for s in sigmas]
    return out


def rng_state(data_rng: torch.Generator) -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "data": data_rng.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any], data_rng: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    data_rng.set_state(state["data"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ------------------------------------------------------------------------------------------------- the loop


def check_resume(out: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint in `out`, if its config is this command's; else a ConfigError naming what differs."""
    require(checkpoint.has_checkpoint(out), f"--resume: no checkpoint in {out}")
    state = checkpoint.load_checkpoint(out)
    saved = state["config"]
    differs = [f"{part}.{k}" for part in ("model", "train", "task") for k in sorted(
        set(saved.get(part, {})) | set(config[part])) if saved.get(part, {}).get(k) != config[part].get(k)]
    require(not differs, f"--resume: the checkpoint in {out} was trained with a different config "
                         f"({', '.join(differs[:4])}); start a new --out or repeat the original command")
    return state


@contextlib.contextmanager
def interrupt_as_exception() -> Iterator[None]:
    """Ctrl-C (and the SIGTERM torchrun forwards) raise KeyboardInterrupt; the loop then saves the last completed step
    (with the data generator rewound to it) and exits."""
    install = (threading.current_thread() is threading.main_thread()  # only the main thread may set handlers
               and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None))
    if install:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def train(preset: str, model_config: GPTConfig, c: TrainConfig, out: str | Path, *, resume: bool = False,
          overwrite: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train, checkpointing into `out`; returns the last metrics record. Every bad input fails (ConfigError) before
    `out` is touched."""
    out = Path(out)
    require(model_config.vocab_size == VOCAB_SIZE, f"every task is bytes: vocab_size must be {VOCAB_SIZE} "
                                                   f"(got {model_config.vocab_size})")
    config = run_config(preset, model_config, c)
    task = make_task(c.task, c.seq_len, c.data, c.task_options)
    d = init_distributed(c.device)
    require(c.batch_size % (d.world * c.grad_accum) == 0,
            f"batch-size {c.batch_size} must be a multiple of ranks × grad-accum = {d.world} × {c.grad_accum}")
    state = check_resume(out, config) if resume else None
    require(resume or overwrite or not checkpoint.has_checkpoint(out),
            f"{out} already holds a checkpoint: pass --resume to continue it, or choose another --out")
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if d.distributed and c.device.startswith("cuda")
                          else c.device)

    torch.manual_seed(c.seed)  # the initial weights: the same for every rank and every (W, A)
    model = GPT(model_config).to(device)
    optimizer, scheduler = make_optimizer(model, c)
    data_rng = torch.Generator().manual_seed(c.seed + 1)  # the data order, shared by every variant with this seed
    start = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        restore_rng(state["rng"], data_rng)
        start = state["step"]
    step_model: nn.Module = torch.compile(model) if c.compile else model
    if d.distributed:
        step_model = nn.parallel.DistributedDataParallel(step_model)
    val_x, val_y = task.validation(c.eval_sequences, c.seq_len)
    val_x, val_y = val_x.to(device), val_y.to(device)
    micro = c.batch_size // (d.world * c.grad_accum)  # rows per rank per micro-step
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if c.bf16 else contextlib.nullcontext
    tokens_per_step = c.batch_size * c.seq_len
    flops_per_token = training_flops_per_token(model_config, c.variant, c.seq_len)

    metrics_path = out / checkpoint.METRICS_FILE
    kept: list[dict[str, Any]] = []
    if d.main:
        out.mkdir(parents=True, exist_ok=True)
        kept = [r for r in checkpoint.read_metrics(out) if r["step"] <= start] if state is not None else []
        metrics_path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    train_time = kept[-1]["time_s"] if kept else 0.0
    bar = None
    if d.main and progress:
        from tqdm import tqdm

        bar = tqdm(total=c.steps, initial=start, desc=f"{preset} {c.task} {LABELS[c.variant]}", unit="step",
                   file=sys.stderr, dynamic_ncols=True, mininterval=0.5 if sys.stderr.isatty() else 15)  # logs: rarely

    saved = start if state is not None else None

    def save(step: int) -> None:
        nonlocal saved
        if d.main:
            checkpoint.save_checkpoint(out, model=model, optimizer=optimizer, scheduler=scheduler, step=step,
                                       rng=rng_state(data_rng), config=config)
        saved = step

    record: dict[str, Any] = {}
    step = start
    data_state = data_rng.get_state()
    try:
        with interrupt_as_exception(), open(metrics_path, "a") if d.main else contextlib.nullcontext() as log:
            while step < c.steps:
                started = time.perf_counter()
                data_state = data_rng.get_state()  # an interrupted step is redone from here on --resume
                x, y = task.batch(c.batch_size, c.seq_len, data_rng)  # (B, T) the global batch, on every rank
                counted = int((y != IGNORE_INDEX).sum())
                rows = slice(d.rank * micro * c.grad_accum, (d.rank + 1) * micro * c.grad_accum)
                x, y = x[rows].to(device, non_blocking=True), y[rows].to(device, non_blocking=True)
                loss_sum = torch.zeros((), device=device)
                for m in range(c.grad_accum):
                    xm, ym = x[m * micro:(m + 1) * micro], y[m * micro:(m + 1) * micro]
                    last = m == c.grad_accum - 1
                    sync = contextlib.nullcontext() if last or not d.distributed else step_model.no_sync()
                    with sync:
                        with autocast():
                            logits = step_model(xm)  # (micro, T, vocab)
                        loss = F.cross_entropy(logits.float().flatten(0, 1), ym.flatten(), ignore_index=IGNORE_INDEX,
                                               reduction="sum")
                        (loss * d.world / counted).backward()
                    loss_sum += loss.detach()
                train_loss = all_reduce_sum(loss_sum, d).item() / counted
                if not math.isfinite(train_loss):
                    kept_note = f"the checkpoint of step {saved} in {out} is intact" if saved else "no checkpoint"
                    raise TrainingDiverged(f"the training loss became {train_loss} at step {step + 1}; stopped "
                                           f"({kept_note})")
                grad_norm = nn.utils.clip_grad_norm_(model.parameters(), c.grad_clip).item()
                lr = scheduler.get_last_lr()[0]
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                step += 1
                elapsed = time.perf_counter() - started
                train_time += elapsed
                record = {"step": step, "tokens": step * tokens_per_step, "lr": lr, "train_loss": train_loss,
                          "grad_norm": grad_norm, "time_s": train_time, "tokens_per_s": tokens_per_step / elapsed,
                          "flops_per_token": flops_per_token}
                if d.main and (step % c.eval_every == 0 or step == c.steps or step == 1):
                    record.update(evaluate(model, val_x, val_y, micro, autocast))
                if d.main:
                    log.write(json.dumps(record) + "\n")
                    log.flush()
                if step % c.checkpoint_every == 0 or step == c.steps:
                    save(step)
                if bar is not None:
                    bar.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{record['tokens_per_s']:,.0f}", refresh=False)
                    bar.update(1)
    except KeyboardInterrupt:
        data_rng.set_state(data_state)
        save(step)
        raise
    finally:
        if bar is not None:
            bar.close()
    if d.distributed:
        import torch.distributed as dist

        dist.barrier()  # rank 0 has written the last checkpoint before any rank returns
    return record


# ---------------------------------------------------------------------------------------------- checkpoints


def train_fresh(preset: str, model_config: GPTConfig, c: TrainConfig, out: str | Path,
                progress: bool = False) -> dict[str, Any]:
    """Train from scratch into a private sibling of `out`, then swap it in: another process reading or training the
    same `out` (a test, another lesson) never sees a half-written run."""
    out = Path(out)
    private = out.with_name(f".{out.name}.{os.getpid()}")
    try:
        last = train(preset, model_config, c, private, overwrite=True, progress=progress)
        for _ in range(3):  # another process may put its copy back between the two calls
            shutil.rmtree(out, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.replace(private, out)
                break
        else:
            raise ConfigError(f"could not replace {out}: another process keeps writing it")
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return last


def ensure_checkpoints(preset: str = "cpu-tiny", task: str = "text", variants: tuple[str, ...] = ATTENTION,
                       progress: bool = False, seed: int = 0) -> dict[str, Path]:
    """outputs/checkpoints/<preset>/<task>/<variant>/ (…/<variant>-seed<S>/ for seed S > 0) for each variant, training
    the ones that are missing, stale (another config) or unfinished. Lessons 09-11 and their tests call this."""
    dirs = {}
    for variant in variants:
        model, c = build_configs(preset, variant, task=task, seed=seed)
        out = default_out(preset, task, variant, c.seed)
        if not _finished(out, run_config(preset, model, c)):
            train_fresh(preset, model, c, out, progress=progress)
        dirs[variant] = out
    return dirs


def _finished(out: Path, config: dict[str, Any]) -> bool:
    try:
        state = checkpoint.load_checkpoint(out)
    except ConfigError:
        return False
    return state["config"] == config and state["step"] == config["train"]["steps"]


# ------------------------------------------------------------------------------------------------------- CLI


def configs_from_args(args) -> tuple[GPTConfig, TrainConfig]:
    overrides = dict(task=args.task, data=args.data, seed=args.seed, steps=args.steps, batch_size=args.batch_size,
                     grad_accum=args.grad_accum, seq_len=args.seq_len, lr=args.lr, device=args.device,
                     eval_every=args.eval_every, checkpoint_every=args.checkpoint_every,
                     compile=args.compile)
    if args.device == "cpu":
        overrides["bf16"] = False
    return build_configs(args.preset, args.attention, lambda_init=args.lambda_init, **overrides)


def main(args) -> int:
    """`python -m diffattn train` (options: diffattn.train_options)."""
    model, c = configs_from_args(args)
    out = args.out or default_out(args.preset, c.task, c.variant, c.seed)
    try:
        last = train(args.preset, model, c, out, resume=args.resume, overwrite=args.overwrite,
                     progress=not args.no_progress)
    except KeyboardInterrupt:
        sys.stderr.write(f"interrupted: checkpoint saved in {out}; add --resume to continue\n")
        return 130
    if int(os.environ.get("RANK", "0")) == 0:
        val = f", val loss {last['val_loss']:.4f}" if "val_loss" in last else ""
        print(f"{LABELS[c.variant]}: step {last['step']}, train loss {last['train_loss']:.4f}{val}, "
              f"{last['tokens_per_s']:,.0f} tokens/s; checkpoint in {out}")
    return 0
