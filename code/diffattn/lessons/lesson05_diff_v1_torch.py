"""Lesson 05: DIFF V1 as a PyTorch module, and the numbers the lesson quotes about it.

  seed        the widely copied six-token torch example, rerun: row sums and the count of negative weights
  schedule    λ_init(depth) for depths 0 … 27 (27 = the last layer of the paper's 28-layer 3B model, App. D, Table 9),
              and the constant (1 − λ_init)
  lambda0     λ at initialisation from freshly built modules, over many seeds: the spread the N(0, 0.1²) init gives
  norm        what the per-head RMSNorm does to each head's scale, on one fresh module
  params      parameter counts of the actual modules at the official example.py sizes
  stdlib      the torch mirror against diffattn.pure on the same numbers, fp64
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from diffattn import pure
from diffattn.nn import functional as ours
from diffattn.nn.attention import DiffAttentionV1, MultiheadAttention
from diffattn.core.numberkinds import Bound, Stable
from diffattn.nn.rope import rope_cos_sin
from diffattn.core.progress import Progress

REQUIRES = ("torch",)  # third-party packages (diffattn.lessons reads this without importing)
TITLE = "DIFF V1 in PyTorch: λ, λ_init, per-head norm, official layout"

# What may move on another CPU (diffattn.core.numberkinds). fp32 maps move in the 7th digit between kernel paths; the
# λ statistics and the norm's RMS reduce fp32 numbers in fp64 and move in the 9th; torch-vs-stdlib fp64 gaps are
# rounding (1e-16): quoted only as the bound the suite asserts.
FP32_ROUNDING = Bound(below=1e-6)
FP64_ROUNDING = Bound(below=1e-14)
NUMBER_KINDS = {
    "seed.row_sum_max_error": FP32_ROUNDING,
    "seed.row_sum_first": Stable(abs=1e-6),
    "seed.weights.*": Stable(abs=1e-6),
    "seed.map1.*": Stable(abs=1e-6),
    "seed.map2.*": Stable(abs=1e-6),
    "seed.smallest_abs_weight": Stable(abs=1e-6),
    **{f"lambda0.*.{stat}": Stable(abs=1e-6) for stat in ("mean", "std", "min", "max", "samples.*")},
    "norm.rms_*": Stable(rel=1e-6),
    "stdlib.*": FP64_ROUNDING,
}

DEPTHS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 27)
INIT_SEEDS = 1000  # modules built per head dim for the λ-at-init spread
INIT_HEAD_DIMS = (64, 128)
EXAMPLE = dict(embed_dim=1024, diff_heads=8, base_heads=16)  # official example.py: DIFF 8 heads vs baseline 16


def seed_example() -> dict:
    """The widely copied six-token snippet, written fresh: two 6×6 softmax maps from seed 0, subtracted with λ = 0.8."""
    torch.manual_seed(0)
    n, d, lam = 6, 8, 0.8
    q1, k1, q2, k2 = torch.randn(4, n, d)  # four (n, d) tensors from one draw, in the seed's order
    v = torch.randn(n, 2 * d)  # drawn as the seed does; V1 values are 2d wide
    weights = ours.diff_weights_v1(q1, k1, q2, k2, lam)  # softmax(q1 k1ᵀ/√d) − λ·softmax(q2 k2ᵀ/√d), (n, n)
    out = ours.diff_attention_v1(q1, k1, q2, k2, v, lam)  # (n, 2d)
    row_sums = weights.sum(dim=-1)
    return {
        "n": n,
        "d": d,
        "lam": lam,
        "row_sum_first": row_sums[0].item(),  # what the seed prints with :.2f
        "row_sum_max_error": (row_sums - (1 - lam)).abs().max().item(),
        "negative": int((weights < 0).sum().item()),
        # the count is exact on every CPU only because no weight sits within rounding (1e-7) of zero
        "smallest_abs_weight": weights.abs().min().item(),
        "total": n * n,
        "softmax_negative": int((ours.attention_weights(q1, k1) < 0).sum().item()),
        "out_shape": list(out.shape),
        "weights": weights.tolist(),
        "map1": ours.attention_weights(q1, k1).tolist(),
        "map2": ours.attention_weights(q2, k2).tolist(),
    }


def lambda_at_init(head_dim: int, seeds: int, bar: Progress | None = None) -> dict:
    """λ − λ_init of freshly built one-head modules (embed_dim = 2·head_dim), one module per seed."""
    offsets = []
    for seed in range(seeds):
        torch.manual_seed(seed)
        module = DiffAttentionV1(2 * head_dim, depth=0, num_heads=1)
        offsets.append(module.lambda_full().item() - module.lambda_init)
        if bar:
            bar.advance()
    mean = sum(offsets) / seeds
    std = math.sqrt(sum((x - mean) ** 2 for x in offsets) / (seeds - 1))
    # λ − λ_init = e^a − e^b with a, b = sums of d products of two N(0, 0.1²) draws: Var a = d·0.1⁴, so for small
    # a, b the spread is √(2·d)·0.01, i.e. 0.16 at d = 128 (derived here, not a paper number; checked by
    # tests/test_05_properties.py::test_lambda_spread_at_init_matches_the_derivation).
    predicted = math.sqrt(2 * head_dim) * 0.01
    return {"mean": mean, "std": std, "predicted_std": predicted, "min": min(offsets), "max": max(offsets),
            "seeds": seeds, "samples": offsets}


def norm_effect(depth: int = 0, seq: int = 64) -> dict:
    """Per-head RMS of (A1 − λA2)V before and after the per-head norm, on one fresh module and random input.

    At initialisation A1 ≈ A2 and both are spread over many keys, so the differential heads are small; the RMSNorm
    brings every head to RMS 1 whatever its scale, and (1 − λ_init) then sets the level.
    """
    torch.manual_seed(0)
    module = DiffAttentionV1(64, depth=depth, num_heads=2).double()
    x = torch.randn(1, seq, 64, dtype=torch.float64)
    rope = rope_cos_sin((0, seq), module.head_dim, dtype=torch.float64)
    with torch.no_grad():
        heads = module.differential_heads(x, rope)  # (1, seq, h, 2d)
        normed = ours.headwise_norm(heads, module.subln.weight, module.lambda_init, module.subln.eps)
    rms = lambda t: t.pow(2).mean(dim=-1).sqrt()  # noqa: E731  (1, seq, h): RMS over each head's 2d channels
    values = module.v_proj(x).pow(2).mean().sqrt().item()
    return {"depth": depth, "seq": seq, "lambda_init": module.lambda_init, "rms_values": values,
            "rms_before": rms(heads).mean().item(), "rms_after": rms(normed).mean().item()}


def parameter_counts() -> dict:
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    e, h_diff, h_base = EXAMPLE["embed_dim"], EXAMPLE["diff_heads"], EXAMPLE["base_heads"]
    v1 = DiffAttentionV1(e, depth=0, num_heads=h_diff)
    return {
        "v1_mha": count(v1),
        "baseline_mha": count(MultiheadAttention(e, h_base)),
        "v1_gqa": count(DiffAttentionV1(e, depth=0, num_heads=h_diff, num_kv_heads=h_diff // 2)),
        "baseline_gqa": count(MultiheadAttention(e, h_base, h_base // 2)),
        "v1_head_dim": v1.head_dim,
        "lambda_params": 4 * v1.head_dim,
        "subln_params": 2 * v1.head_dim,
    }


def stdlib_agreement(seed: int = 0) -> dict:
    """Max |torch − diffattn.pure| for the V1 and V2 head functions on the same fp64 numbers."""
    g = torch.Generator().manual_seed(seed)
    n_q, n_k, d = 5, 7, 4
    q1, q2 = torch.randn(2, n_q, d, generator=g, dtype=torch.float64)
    k1, k2 = torch.randn(2, n_k, d, generator=g, dtype=torch.float64)
    v = torch.randn(n_k, 2 * d, generator=g, dtype=torch.float64)
    logits = torch.randn(n_q, generator=g, dtype=torch.float64)
    rows = lambda t: t.tolist()  # noqa: E731
    v1 = ours.diff_attention_v1(q1, k1, q2, k2, v, 0.7, causal=True)
    v1_pure = pure.diff_attention_v1(rows(q1), rows(k1), rows(q2), rows(k2), rows(v), 0.7, causal=True)
    v2 = ours.diff_attention_v2(q1, q2, k1, v[:, :d], logits, causal=True)
    v2_pure = pure.diff_attention_v2(rows(q1), rows(q2), rows(k1), rows(v[:, :d]), logits.tolist(), causal=True)
    diff = lambda a, b: (a - torch.tensor(b, dtype=torch.float64)).abs().max().item()  # noqa: E731
    return {"v1": diff(v1, v1_pure), "v2": diff(v2, v2_pure)}


def run(progress: bool = True) -> dict:
    with Progress(INIT_SEEDS * len(INIT_HEAD_DIMS), "λ at init over seeds", enabled=progress) as bar:
        lambda0 = {str(d): lambda_at_init(d, INIT_SEEDS, bar) for d in INIT_HEAD_DIMS}
    for summary in lambda0.values():
        del summary["samples"]  # the notebook plots them; numbers.json keeps the summary
    return {
        "seed": seed_example(),
        "schedule": {
            "depths": list(DEPTHS),
            "lambda_init": [ours.lambda_init(depth) for depth in DEPTHS],
            "scale": [1 - ours.lambda_init(depth) for depth in DEPTHS],
            "one_based_first_layer": ours.lambda_init(1),  # what layer 0 gets if the code is fed l = depth + 1
        },
        "lambda0": lambda0,
        "norm": norm_effect(),
        "params": parameter_counts(),
        "stdlib": stdlib_agreement(),
    }


def report(results: dict) -> str:
    s, sched, p = results["seed"], results["schedule"], results["params"]
    lines = [
        f"the six-token example (torch.manual_seed(0), n={s['n']}, d={s['d']}, λ={s['lam']}):",
        f"  Each row sums to {s['row_sum_first']:.2f}; {s['negative']} of {s['total']} weights are negative",
        f"  every row equals 1 − λ to below {FP32_ROUNDING.below:.0e} (fp32); a single softmax map has "
        f"{s['softmax_negative']} negative weights",
        f"  the weight nearest zero is {s['smallest_abs_weight']:.4f}, far from fp32 rounding: the count of negatives "
        "is the same on every CPU",
        "",
        "λ_init(depth) = 0.8 − 0.6·exp(−0.3·depth), depth 0-based; the norm's constant is 1 − λ_init:",
        "  depth      " + " ".join(f"{d:>6}" for d in sched["depths"]),
        "  λ_init     " + " ".join(f"{x:6.4f}" for x in sched["lambda_init"]),
        "  1 − λ_init " + " ".join(f"{x:6.4f}" for x in sched["scale"]),
        f"  feeding a 1-based index gives the first layer {sched['one_based_first_layer']:.4f} instead of 0.2000",
        "",
        "λ − λ_init at initialisation (fresh modules, λ vectors ~ N(0, 0.1²)):",
    ]
    for d, r in results["lambda0"].items():
        lines.append(f"  d = {d:>3}: mean {r['mean']:+.4f}  std {r['std']:.4f}  (predicted √(2d)·0.01 = "
                     f"{r['predicted_std']:.4f})  range [{r['min']:+.3f}, {r['max']:+.3f}] over {r['seeds']} seeds")
    n = results["norm"]
    lines += [
        "",
        f"per-head norm on a fresh module (depth {n['depth']}, {n['seq']} tokens): RMS of the values "
        f"{n['rms_values']:.3f}, of (A1 − λA2)V per head {n['rms_before']:.3f}, after RMSNorm × (1 − λ_init) "
        f"{n['rms_after']:.3f}",
        "",
        "parameters of the actual modules (embed_dim 1024, DIFF 8 heads of d = "
        f"{p['v1_head_dim']} vs baseline 16 heads):",
        f"  MHA  DiffAttentionV1 {p['v1_mha']:,}   MultiheadAttention {p['baseline_mha']:,}",
        f"  GQA  DiffAttentionV1 {p['v1_gqa']:,}   MultiheadAttention {p['baseline_gqa']:,}   (KV heads 4 vs 8)",
        f"  difference = 4·d λ entries ({p['lambda_params']}) + 2d subln weights ({p['subln_params']})",
        "",
        f"torch vs stdlib (diffattn.pure), fp64, max |difference| < {FP64_ROUNDING.below:.0e}: "
        + ", ".join(f"{name.upper()} {'yes' if FP64_ROUNDING.holds(gap) else 'NO'}"
                    for name, gap in results["stdlib"].items()),
    ]
    return "\n".join(lines)


def figures(results: dict, outdir: Path) -> list[Path]:
    from diffattn.core.plotting import new_figure, save

    s = results["seed"]
    fig, ax = new_figure(11.0, 3.6)
    ax.remove()  # three panels instead of new_figure's single axis
    panels = [(s["map1"], "map1 = softmax(q1 k1ᵀ/√d)"), (s["map2"], "map2 = softmax(q2 k2ᵀ/√d)"),
              (s["weights"], f"map1 − {s['lam']}·map2  (rows sum to {1 - s['lam']:.1f})")]
    for i, (data, title) in enumerate(panels):
        axis = fig.add_subplot(1, 3, i + 1)
        image = axis.imshow(data, cmap="RdBu_r", vmin=-1, vmax=1)  # one scale centred at 0: blue = negative
        axis.set_title(title, fontsize=9)
        axis.set_xlabel("key")
        axis.set_ylabel("query")
    fig.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    first = save(fig, outdir / "05-seed-example.png")

    sched = results["schedule"]
    fig, ax = new_figure()
    ax.plot(sched["depths"], sched["lambda_init"], "o-", label="λ_init(depth)")
    for d, r in results["lambda0"].items():
        ax.errorbar([-0.3 if d == "64" else 0.3], [sched["lambda_init"][0] + r["mean"]], yerr=[r["std"]], fmt="s",
                    capsize=4, label=f"λ at init, depth 0, d = {d} (±1 std over {r['seeds']} seeds)")
    ax.axhline(0.8, color="grey", linestyle=":", label="limit 0.8")
    ax.set_xlabel("depth (0-based layer index)")
    ax.set_ylabel("λ")
    ax.set_title("DIFF V1: λ_init schedule and the spread of λ at initialisation")
    ax.legend(fontsize=8)
    return [first, save(fig, outdir / "05-lambda-init.png")]
