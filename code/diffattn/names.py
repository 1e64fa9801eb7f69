"""The course's names, defined once (stdlib only: the CLI's --help and the stdlib track import it without torch).

Two words, two concepts:

    attention  the kind of attention layer a model is built with (GPTConfig.attention): baseline, diff_v1, diff_v2
    variant    one of lesson 07's four matched models (TrainConfig.variant, `--variant`, the "variants" of every
               results table): the three kinds, plus baseline_2h, a baseline with twice the query heads, whose
               attention is "baseline"
"""

from __future__ import annotations

ATTENTION = ("baseline", "diff_v1", "diff_v2")
VARIANTS = ("baseline", "baseline_2h", "diff_v1", "diff_v2")
EVALUATED = ATTENTION  # lessons 09-11 evaluate one trained model per attention kind
TASKS = ("text", "needles", "mqar", "rebind")  # diffattn.data.make_task
BACKENDS = ("auto", "flash_attn", "sdpa", "math")  # diffattn.nn.kernels.attention
CACHES = ("cat", "static")  # diffattn.nn.cache: torch.cat per step, or a preallocated buffer written in place
LABELS = {"baseline": "baseline", "baseline_2h": "2h heads", "diff_v1": "DIFF V1", "diff_v2": "DIFF V2"}
