"""Training throughput and MFU of the presets (lesson 12).

MFU (model FLOPs utilisation, PaLM's definition): the FLOPs the model needs per token (3 × forward, lesson 04's
accounting, `diffattn.training.loop.training_flops_per_token`) × tokens/s, over a peak. Two peaks: the GEMM rate this run
measured (what the machine can do) and the datasheet's (what it is sold as), where one is known: the GPUs in
`diffattn.core.hardware.DATASHEET_BF16`; a virtualised CPU of unknown model has none, and none is invented.
"""

from __future__ import annotations

from typing import Callable

from diffattn.training.compare import bare_loop_tokens_per_s
from diffattn.config import build_configs
from diffattn.perf.phases import model_phase_counts
from diffattn.perf.decode import point
from diffattn.training.loop import training_flops_per_token

PRESETS = ("cpu-tiny", "cpu-small")


def train_points(presets: tuple[str, ...], variants: tuple[str, ...], steps: int, ceilings: tuple[float, float],
                 datasheet_flops: float | None = None, advance: Callable[[], None] = lambda: None,
                 **overrides: int) -> list[dict]:
    """Median tokens/s of `steps` plain training steps (forward, loss, backward, AdamW) per preset and variant,
    with MFU against the measured peak and the datasheet peak (None where there is none); `overrides` (batch_size,
    seq_len) shrink the preset's batches for a quick run, `device` "cuda" trains there (plain fp32, no compile)."""
    peak, bandwidth = ceilings
    rows = []
    for preset in presets:
        for variant in variants:
            model, c = build_configs(preset, variant, steps=steps, **overrides)
            tokens_per_s = bare_loop_tokens_per_s(preset, variant, steps, **overrides)
            counted = model_phase_counts(model, variant, "train", c.batch_size, c.seq_len, 4)
            model_flops = training_flops_per_token(model, variant, c.seq_len) * tokens_per_s
            row = point(variant, "train", c.batch_size, c.seq_len, counted, c.batch_size * c.seq_len / tokens_per_s,
                        peak, bandwidth)
            rows.append(row | {"preset": preset, "steps": steps, "tokens_per_s": tokens_per_s,
                               "mfu_measured_peak": model_flops / peak,
                               "mfu_datasheet_peak": model_flops / datasheet_flops if datasheet_flops else None})
            advance()
    return rows
