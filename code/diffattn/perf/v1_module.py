"""Lesson 12: our DIFF V1 attention module against transformers' DiffLlamaAttention on CPU, at every thread count a
learner meets: 1 torch thread, 2, and all usable cores with the machine idle, then all cores with one core kept busy
by another process (a browser, a build). Forward+backward in fp32, three ways timed in turn (`round_robin`):

    fused        our module as it runs by default (`nn.diff_v1_kernel`: each map once, P = A1 − λA2 applied to V once)
    four calls   the same module inside `separate_maps()`: the four d-wide SDPA calls the fused kernel replaced
    hf           DiffLlamaAttention on the same config, when transformers is installed (a dev-only comparison)

Same d_model, d, λ parameters and causal masking; DiffLlama counts heads as d-wide Q/K heads (2× ours) and runs two
SDPA calls over all of them with V split in halves.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

import torch

from diffattn.core.hardware import usable_cores
from diffattn.nn.cpu import threads
from diffattn.perf.load import LoadLog, Setting, one_core_busy, settings
from diffattn.perf.timing import round_robin


def compare(s, iters: int, hf: bool = True) -> dict:
    """One shape (`perf.bench.Shape`) at torch's present thread count: milliseconds per forward+backward of each way,
    and the ratios (time ratios: "speedup_vs_hf" 1.3 means the fused module took 1/1.3 of DiffLlama's time)."""
    from diffattn.nn.attention import DiffAttentionV1
    from diffattn.nn.diff_v1_kernel import separate_maps
    from diffattn.nn.rope import rope_cos_sin

    torch.manual_seed(0)
    ours = DiffAttentionV1(s.d_model, depth=0, num_heads=s.heads // 2, num_kv_heads=s.kv_heads // 2)
    x = torch.randn(s.batch, s.seq, s.d_model, requires_grad=True)
    our_rope = rope_cos_sin((0, s.seq), s.head_dim)

    def separate_step() -> None:
        with separate_maps():
            ours(x, our_rope).sum().backward()

    steps = {"ours": lambda: ours(x, our_rope).sum().backward(), "ours_separate": separate_step}
    result: dict = {"shape": vars(s)}
    try:
        if not hf:
            raise ImportError
        import transformers
        from transformers import DiffLlamaConfig
        from transformers.models.diffllama.modeling_diffllama import DiffLlamaAttention, DiffLlamaRotaryEmbedding
    except ImportError:
        result["hf_skipped"] = ("transformers is not installed (pip install -e '.[hf]')" if hf else
                                "--no-hf")
    else:
        config = DiffLlamaConfig(hidden_size=s.d_model, num_attention_heads=s.heads, num_key_value_heads=s.kv_heads,
                                 head_dim=s.head_dim, max_position_embeddings=s.seq, attention_dropout=0.0)
        config._attn_implementation = "sdpa"
        theirs = DiffLlamaAttention(config, layer_idx=0)
        hf_rope = DiffLlamaRotaryEmbedding(config)(x, torch.arange(s.seq)[None])
        steps["hf"] = lambda: theirs(x, position_embeddings=hf_rope, attention_mask=None)[0].sum().backward()
        result["transformers"] = transformers.__version__
    seconds = round_robin(steps, repeats=2 * iters)
    result |= {f"{name}_fwd_bwd_ms": t * 1e3 for name, t in seconds.items()}
    result["fused_speedup"] = seconds["ours_separate"] / seconds["ours"]
    if "hf" in seconds:
        result |= {"speedup_vs_hf": seconds["hf"] / seconds["ours"],
                   "separate_speedup_vs_hf": seconds["hf"] / seconds["ours_separate"]}
    return result


def sweep(shapes, iters: int, hf: bool, log: LoadLog, rows: list[dict],
          saved: Callable[[], None] = lambda: None, cores: int | None = None) -> list[dict]:
    """`compare` every shape under every setting, appending rows (each with "setting", "threads", "one_core_busy") and
    calling `saved()` after each; the load is sampled after each setting with the threads the run kept busy."""
    for setting in settings(cores or usable_cores()):
        log.phase(setting.threads + setting.busy)
        with threads(setting.threads), (one_core_busy() if setting.busy else nullcontext()):
            for s in shapes:
                rows.append({"setting": setting.name, "threads": setting.threads, "one_core_busy": setting.busy}
                            | compare(s, iters, hf))
                saved()
        log.sample(setting.name)
    return rows


def report(rows: list[dict]) -> list[str]:
    """The table `diffattn bench` prints: one line per shape and setting."""
    if not rows:
        return []
    version = next((r["transformers"] for r in rows if "transformers" in r), None)
    lines = ["V1 module forward+backward, fp32, ms: fused · four calls" + (f" · HF DiffLlamaAttention (transformers "
             f"{version})" if version else "") + "; ratios are speed-ups (time ratios)",
             f"  {'B×S, d_model':<16}{'setting':<26}{'fused':>8}{'4 calls':>9}{'HF':>8}{'fused/4 calls':>15}"
             f"{'fused vs HF':>13}{'4 calls vs HF':>15}"]
    for r in rows:
        s = r["shape"]
        shape = f"{s['batch']}×{s['seq']}, {s['heads'] * s['head_dim']}"
        setting = Setting(r["threads"], r["one_core_busy"]).label
        hf = ((f"{r['hf_fwd_bwd_ms']:>8.1f}", f"{r['speedup_vs_hf']:>13.2f}", f"{r['separate_speedup_vs_hf']:>15.2f}")
              if "hf_fwd_bwd_ms" in r else (f"{'-':>8}", f"{'-':>13}", f"{'-':>15}"))
        lines.append(f"  {shape:<16}{setting:<26}{r['ours_fwd_bwd_ms']:>8.1f}{r['ours_separate_fwd_bwd_ms']:>9.1f}"
                     f"{hf[0]}{r['fused_speedup']:>15.2f}{hf[1]}{hf[2]}")
    skipped = next((r["hf_skipped"] for r in rows if "hf_skipped" in r), None)
    if skipped:
        lines.append(f"  (HF DiffLlama skipped: {skipped})")
    return lines
