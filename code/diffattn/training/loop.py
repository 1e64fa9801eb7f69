"""Lesson 08: train one variant of the lesson-07 GPT on one task, on CPU, one GPU, or several with torchrun.

    diffattn train --preset cpu-tiny --variant diff_v2 [--task text] [--out DIR] [--resume] [--seed 0]
    torchrun --standalone --nproc_per_node=2 -m diffattn train --preset cpu-tiny --variant diff_v1

One optimizer step, for a global batch of B sequences of T tokens split over W ranks and A accumulation micro-steps:

    x, y     = task.batch(B, T, data_rng)               every rank draws the same global batch, then keeps its rows
    n        = #{targets ≠ −100}                        over the whole global batch (text: B·T)
    for each of rank r's A micro-batches (B/(W·A) rows):
        loss_m = Σ_tokens CE(model(x_m), y_m) · W / n    summed, not averaged: so every (W, A) gives the same gradient
        loss_m.backward()                               DDP all-reduces (averages over W) on the last micro-step only
    g        = clip(g, max_norm)                        global-norm gradient clipping
    θ        = AdamW(θ, g, lr(step))                     decoupled weight decay on matrices, none on norms and λ
    lr(step) = lr_max · step/warmup                      then cosine from lr_max down to min_lr_ratio · lr_max

Every number the lesson quotes comes from metrics.jsonl (diffattn.training.checkpoint), which this loop writes on rank 0.
The configs and presets are diffattn.config; resuming exactly, diffattn.training.resume; whole runs and the checkpoint cache,
diffattn.training.runs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from diffattn.pure import variants
from diffattn.training import checkpoint
from diffattn.config import (
    GPTConfig,
    accounting_model,
    TrainConfig,
    run_config,
)
from diffattn.data import IGNORE_INDEX, VOCAB_SIZE, make_task, retrieval
from diffattn.core.errors import ConfigError, interrupt_as_exception, require
from diffattn.core.hardware import compile_backend
from diffattn.model.gpt import GPT
from diffattn.pure.variants import LABELS
from diffattn.pure import accounting
from diffattn.training.resume import check_resume, restore_rng, rng_state


class TrainingDiverged(ConfigError):
    """The loss became NaN or Inf; raised before the bad step touches the weights or any checkpoint."""


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
    return 3 * accounting.forward_flops_per_token(accounting_model(model, variant), variant, seq_len)["total"]


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
def evaluate(model: GPT, inputs: Tensor, targets: Tensor, micro_batch: int, autocast,
             items: Sequence[retrieval.Example] | None = None) -> dict[str, Any]:
    """Validation loss (mean over counted targets), and the λ each DIFF layer applied: V1's scalar λ per layer,
    V2's σ(λ_t) averaged over heads and validation tokens per layer. With the retrieval examples behind the inputs
    (`items`), also their exact-match accuracy and which queries were answered ("1"/"0" per asked key, in order), so
    that a learning curve can be tested against the examples' null models (diffattn.data.nulls)."""
    model.eval()
    sigmas: list[list[float]] = [[] for _ in model.blocks]
    hooks = [block.attn.lambda_proj.register_forward_hook(
        lambda _m, _i, out, i=i: sigmas[i].append(torch.sigmoid(out.float()).mean().item()))
        for i, block in enumerate(model.blocks) if getattr(block.attn, "learned_gate", False)]  # "half": no λ_proj
    total, count, flags = 0.0, 0, []
    try:
        for start in range(0, len(inputs), micro_batch):
            x = inputs[start:start + micro_batch]
            y = targets[start:start + micro_batch]
            with autocast():
                logits = model(x)
            if items is not None:
                flags += retrieval.answered(logits, items[start:start + micro_batch])
            total += F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX,
                                     reduction="sum").item()
            count += int((y != IGNORE_INDEX).sum())
    finally:
        for hook in hooks:
            hook.remove()
    model.train()
    out: dict[str, Any] = {"val_loss": total / count}
    if items is not None:
        out["val_accuracy"] = sum(flags) / len(flags)
        out["val_answered"] = "".join("1" if f else "0" for f in flags)
    if variants.get(model.config.attention).lambda_kind == "per_layer":  # V1: one learned λ per layer
        out["lambda"] = [block.attn.lambda_full().item() for block in model.blocks]
    if hooks:
        out["sigma_lambda"] = [sum(s) / len(s) for s in sigmas]
    return out


# ------------------------------------------------------------------------------------------------- the loop


def train_step(step_model: nn.Module, model: GPT, optimizer: torch.optim.Optimizer, scheduler: Any, x: Tensor,
               y: Tensor, c: TrainConfig, d: Dist, micro: int, device: torch.device, autocast) -> dict[str, float]:
    """One optimizer step on the global batch x, y (B, T) (the module docstring's equations): this rank's rows in
    `c.grad_accum` micro-batches of `micro` rows, the gradient summed and all-reduced, clipped, then AdamW. A loss that
    is not finite raises TrainingDiverged before the update touches the weights."""
    counted = int((y != IGNORE_INDEX).sum())  # n, over the whole global batch
    rows = slice(d.rank * micro * c.grad_accum, (d.rank + 1) * micro * c.grad_accum)
    x, y = x[rows].to(device, non_blocking=True), y[rows].to(device, non_blocking=True)
    loss_sum = torch.zeros((), device=device)
    for m in range(c.grad_accum):
        xm, ym = x[m * micro:(m + 1) * micro], y[m * micro:(m + 1) * micro]  # (micro, T)
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
        raise TrainingDiverged(f"the training loss became {train_loss}")
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), c.grad_clip).item()
    lr = scheduler.get_last_lr()[0]
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return {"train_loss": train_loss, "grad_norm": grad_norm, "lr": lr}


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
            f"{out} already holds a checkpoint: pass --resume to continue it, --overwrite to replace it, "
            f"or choose another --out")
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
    step_model: nn.Module = torch.compile(model, backend=compile_backend()) if c.compile else model
    if d.distributed:
        step_model = nn.parallel.DistributedDataParallel(step_model)
    val_items = task.validation_examples(c.eval_sequences, c.seq_len) if c.task != "text" else None
    val_x, val_y = task.validation(c.eval_sequences, c.seq_len)
    val_x, val_y = val_x.to(device), val_y.to(device)
    micro = c.batch_size // (d.world * c.grad_accum)  # rows per rank per micro-step
    # bf16 autocast: the GPU presets; on CPU only in scripts/gpu_check.sh's rehearsal (it is slower there than fp32)
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if c.bf16 else contextlib.nullcontext
    tokens_per_step = c.batch_size * c.seq_len
    flops_per_token = training_flops_per_token(model_config, c.variant, c.seq_len)

    metrics_path = out / checkpoint.METRICS_FILE
    kept: list[dict[str, Any]] = []
    if d.main:
        out.mkdir(parents=True, exist_ok=True)
        kept = [r for r in checkpoint.read_metrics(out) if r["step"] <= start] if state is not None else []
        metrics_path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    train_time = kept[-1]["time_s"] if kept else 0.0
    bar, last_accuracy = None, None
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
                data_state = data_rng.get_state()  # an interrupted step is redone from here on --resume
                x, y = task.batch(c.batch_size, c.seq_len, data_rng)  # (B, T) the global batch, on every rank
                started = time.perf_counter()  # tokens/s times the step, not the (CPU) batch building
                try:
                    update = train_step(step_model, model, optimizer, scheduler, x, y, c, d, micro, device, autocast)
                except TrainingDiverged as exc:
                    kept_note = f"the checkpoint of step {saved} in {out} is intact" if saved else "no checkpoint"
                    raise TrainingDiverged(f"{exc} at step {step + 1}; stopped ({kept_note})") from None
                step += 1
                elapsed = time.perf_counter() - started
                train_time += elapsed
                record = {"step": step, "tokens": step * tokens_per_step, "lr": update["lr"],
                          "train_loss": update["train_loss"], "grad_norm": update["grad_norm"], "time_s": train_time,
                          "tokens_per_s": tokens_per_step / elapsed, "flops_per_token": flops_per_token}
                if d.main and (step % c.eval_every == 0 or step == c.steps or step == 1):
                    record.update(evaluate(model, val_x, val_y, micro, autocast, val_items))
                if d.main:
                    log.write(json.dumps(record) + "\n")
                    log.flush()
                if step % c.checkpoint_every == 0 or step == c.steps:
                    save(step)
                if bar is not None:
                    shown = {"loss": f"{update['train_loss']:.3f}", "tok_s": f"{record['tokens_per_s']:,.0f}"}
                    if "val_accuracy" in record:  # a retrieval task's last validation accuracy, kept between passes
                        last_accuracy = f"{record['val_accuracy']:.2f}"
                    if last_accuracy is not None:
                        shown["val_acc"] = last_accuracy
                    bar.set_postfix(shown, refresh=False)
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
