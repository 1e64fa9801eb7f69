"""Dev-only cross-check for lesson 08: does an implementation nobody in this repo wrote show DIFF V1's loss gap too?

    PYTHONPATH=code python scripts/diffllama_gap.py [--seeds 3] [--out outputs/study/diffllama.json]

Lesson 08 finds the course's DIFF V1 *worse* than its matched baseline on cpu-small text (by roughly +0.1 to +0.2
nats/byte after 300 steps), the opposite of the paper at scale. A bug in our V1 would look exactly like that, so this
script trains Hugging Face transformers' DiffLlamaForCausalLM (an independent DIFF V1, written from the paper and
Microsoft's code) against transformers' LlamaForCausalLM at the course's shapes, data and budget, paired by seed, and
reports the gap DiffLlama − Llama in validation loss (mean cross-entropy over every target byte, nats/byte) with a t
95% interval over seeds. If HF's pair shows a gap of the same sign and size, the deficit belongs to DIFF V1 at this
scale, not to our code.

What is shared with the course (read from diffattn, not copied): the cpu-small preset (diffattn.config.PRESETS), the
text task and its validation windows (diffattn.data.make_task), the optimizer and schedule (diffattn.training.loop.make_optimizer:
AdamW betas (0.9, 0.95), decay 0.1 on matrices and none on vectors or λ, warmup then cosine to 0.1·lr), the seed
convention (torch.manual_seed(seed) before the weights, a data generator seeded seed + 1). The step itself mirrors
diffattn.training.loop.train_step for one process without accumulation (summed CE / counted targets, global-norm clip
1.0), since train_step expects a diffattn GPT. The models are transformers' own, configured so that
DiffLlama's attention is the course's V1 (num_attention_heads = h_base d-wide heads, i.e. h_base/2 differential
heads; num_key_value_heads = h_kv, i.e. h_kv/2 KV groups with 2d-wide values; as in diffattn.perf.v1_module.compare).
The known differences from the course's models are listed in MISMATCHES and written into the JSON.

transformers is a dev-only tool here (pip install transformers), never a dependency of the diffattn package; without it
this script stops with a one-line error (exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "code") not in sys.path:
    sys.path.insert(0, str(ROOT / "code"))

PRESET = "cpu-small"
DEFAULT_OUT = ROOT / "outputs" / "study" / "diffllama.json"
PRINT_EVERY = 50

MISMATCHES = [
    "DiffLlama's per-head RMSNorm (self_attn.groupnorm) has no learnable gain (elementwise_affine=False, as in the "
    "first DIFF V1 release); the course's V1 subln has a 2d-wide gain initialised to 1 (8·d = 256 parameters fewer "
    "in total at cpu-small). --subln-gain adds one (init 1, no decay) to test whether it matters.",
    "RoPE pairs dims (i, i + d/2) (rotate-half) in transformers and (2i, 2i+1) (interleaved) in the course: the same "
    "rotation with the channels permuted, so the function class and the i.i.d. initial distribution are identical.",
    "DiffLlama orders its d-wide query heads as [all q1 | all q2] and its keys/values as [k1 of every KV group | k2 ...], "
    "[first d of every value | second d ...]; the course interleaves (q1_i, q2_i) and keeps a KV group's 2d value "
    "contiguous. Again a permutation of projection rows, not a different model.",
    "Initial weights are drawn in a different order (transformers' post_init re-initialises every module), so seed s "
    "gives different weights than the course's seed s; the pairing here is Llama vs DiffLlama under the same seed and "
    "data order, exactly like the course's baseline vs V1.",
    "RoPE cos/sin are computed in fp32 by transformers (fp64, rounded once, by the course); attention is SDPA in both.",
]


def hf_configs(transformers, model) -> dict[str, Any]:
    """The Llama and DiffLlama configs for the course's baseline shape `model` (a diffattn GPTConfig, n_head = h_base):
    lesson 13's export mapping (diffattn.training.warmstart.hf.hf_config), so DiffLlama's attention is the course's V1."""
    from diffattn.training.warmstart.hf import hf_config

    return {kind: hf_config(transformers, model, kind) for kind in ("llama", "diffllama")}


def build_model(transformers, kind: str, config, seed: int, subln_gain: bool = False):
    import torch
    from torch import nn

    torch.manual_seed(seed)  # the course's convention: the initial weights follow the seed
    cls = transformers.LlamaForCausalLM if kind == "llama" else transformers.DiffLlamaForCausalLM
    net = cls(config)
    if net.config.tie_word_embeddings:
        assert net.lm_head.weight is net.model.embed_tokens.weight, "tie_word_embeddings did not tie the head"
    if kind == "diffllama" and subln_gain:  # the course's V1: a learnable gain on each head's 2d channels, init 1
        for layer in net.model.layers:
            old = layer.self_attn.groupnorm
            layer.self_attn.groupnorm = nn.RMSNorm(old.normalized_shape, eps=old.eps, elementwise_affine=True)
    net.train()
    return net


def evaluate(net, inputs, targets, micro: int) -> float:
    """Mean cross-entropy over every counted target (nats/byte), as diffattn.training.loop.evaluate computes it."""
    import torch
    from torch.nn import functional as F

    from diffattn.data import IGNORE_INDEX

    net.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(inputs), micro):
            x, y = inputs[start:start + micro], targets[start:start + micro]
            logits = net(input_ids=x, use_cache=False).logits
            total += F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX,
                                     reduction="sum").item()
            count += int((y != IGNORE_INDEX).sum())
    net.train()
    return total / count


def lambdas(net) -> list[float] | None:
    """DiffLlama's λ per layer: exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init (None for Llama)."""
    import torch

    attn = [layer.self_attn for layer in net.model.layers]
    if not hasattr(attn[0], "lambda_q1"):
        return None
    with torch.no_grad():
        return [float(torch.exp((a.lambda_q1 * a.lambda_k1).sum()) - torch.exp((a.lambda_q2 * a.lambda_k2).sum())
                      + a.lambda_init) for a in attn]


def train_one(transformers, kind: str, config, seed: int, task, train, val, subln_gain: bool,
              log=sys.stderr) -> dict[str, Any]:
    import torch
    from torch import nn
    from torch.nn import functional as F

    from diffattn.data import IGNORE_INDEX
    from diffattn.training.loop import make_optimizer, parameter_groups

    net = build_model(transformers, kind, config, seed, subln_gain)
    optimizer, scheduler = make_optimizer(net, train)  # the course's AdamW groups and WarmupCosine
    groups = parameter_groups(net, train.weight_decay)
    data_rng = torch.Generator().manual_seed(seed + 1)  # the course's data order for this seed
    val_x, val_y = val
    curve: dict[str, list] = {"step": [], "val_loss": [], "train_loss": []}
    train_curve: list[float] = []
    started = time.perf_counter()
    for step in range(1, train.steps + 1):
        x, y = task.batch(train.batch_size, train.seq_len, data_rng)  # (B, T) bytes, y = x shifted by one
        counted = int((y != IGNORE_INDEX).sum())
        logits = net(input_ids=x, use_cache=False).logits  # (B, T, 256)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX,
                               reduction="sum")
        (loss / counted).backward()
        train_loss = loss.item() / counted
        if not math.isfinite(train_loss):
            raise RuntimeError(f"{kind} seed {seed}: the training loss became {train_loss} at step {step}")
        nn.utils.clip_grad_norm_(net.parameters(), train.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        train_curve.append(train_loss)
        if step % train.eval_every == 0 or step == train.steps or step == 1:  # the course's eval steps
            curve["step"].append(step)
            curve["val_loss"].append(evaluate(net, val_x, val_y, train.batch_size))
            curve["train_loss"].append(train_loss)
        if step % PRINT_EVERY == 0 or step == train.steps:
            print(f"[{kind} seed {seed}] step {step}/{train.steps} train {train_loss:.4f} "
                  f"val {curve['val_loss'][-1]:.4f} ({time.perf_counter() - started:.0f} s)", file=log, flush=True)
    return {"final_val_loss": curve["val_loss"][-1], "final_train_loss": train_curve[-1], "curve": curve,
            "train_curve": train_curve, "lambda": lambdas(net), "params": sum(p.numel() for p in net.parameters()),
            "decayed_params": sum(p.numel() for p in groups[0]["params"]),
            "undecayed_params": sum(p.numel() for p in groups[1]["params"]), "time_s": time.perf_counter() - started}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", type=int, default=3, help="train seeds 0 … N−1 (default 3)")
    p.add_argument("--steps", type=int, default=None, help=f"optimizer steps (default: {PRESET}'s)")
    p.add_argument("--eval-sequences", type=int, default=None, help=f"validation windows (default: {PRESET}'s)")
    p.add_argument("--eval-every", type=int, default=None, help=f"validation every N steps (default: {PRESET}'s)")
    p.add_argument("--subln-gain", action="store_true",
                   help="give DiffLlama's per-head norm a learnable gain like the course's V1 (default: HF as shipped)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON to write (default {DEFAULT_OUT.relative_to(ROOT)})")
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error("--seeds must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import transformers
        from transformers import DiffLlamaForCausalLM, LlamaForCausalLM  # noqa: F401  (both must exist)
    except ImportError as exc:
        print(f"error: this dev-only check needs transformers with DiffLlama ({exc}); pip install transformers",
              file=sys.stderr)
        return 2
    import torch

    from diffattn.training.compare import machine
    from diffattn.config import build_configs
    from diffattn.data import make_task
    from diffattn.core.stats import t_interval

    wall = time.perf_counter()
    model, train = build_configs(PRESET, "baseline", steps=args.steps, eval_sequences=args.eval_sequences,
                                 eval_every=args.eval_every)
    configs = hf_configs(transformers, model)
    task = make_task("text", train.seq_len)
    val = task.validation(train.eval_sequences, train.seq_len)
    seeds = list(range(args.seeds))
    runs = []
    for seed in seeds:
        run: dict[str, Any] = {"seed": seed}
        for kind in ("llama", "diffllama"):
            run[kind] = train_one(transformers, kind, configs[kind], seed, task, train, val, args.subln_gain)
        run["gap"] = run["diffllama"]["final_val_loss"] - run["llama"]["final_val_loss"]
        print(f"seed {seed}: Llama {run['llama']['final_val_loss']:.4f}  DiffLlama "
              f"{run['diffllama']['final_val_loss']:.4f}  gap {run['gap']:+.4f} nats/byte", file=sys.stderr, flush=True)
        runs.append(run)
    gap = t_interval([r["gap"] for r in runs])
    result = {
        "what": "validation loss (nats/byte) of HF DiffLlamaForCausalLM − HF LlamaForCausalLM, trained from scratch "
                f"at the course's {PRESET} shapes, data and schedule, paired by seed (dev-only check for lesson 08)",
        "transformers": transformers.__version__, "torch": torch.__version__, "preset": PRESET,
        "subln_gain": args.subln_gain,
        "config": {"course_model": dataclasses.asdict(model), "train": dataclasses.asdict(train),
                   "validation_sequences": len(val[0]),
                   "llama": configs["llama"].to_dict(), "diffllama": configs["diffllama"].to_dict()},
        "mismatches": MISMATCHES,
        "seeds": seeds,
        "runs": runs,
        "gap": gap,
        "llama_final": t_interval([r["llama"]["final_val_loss"] for r in runs]),
        "diffllama_final": t_interval([r["diffllama"]["final_val_loss"] for r in runs]),
        "machine": machine(),
        "wall_s": time.perf_counter() - wall,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    ci = gap["ci95"]
    ci_text = f"[{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else "(one seed: no interval)"
    print(f"gap DiffLlama − Llama: {gap['mean']:+.4f} nats/byte, t 95% {ci_text}, n={gap['n']}; "
          f"wall {result['wall_s']:.0f} s → {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
