"""The course's lists of choices, defined once (stdlib only: the CLI's --help and the stdlib track import it without
torch). The attention variants and their labels are declared with everything else about them, in
diffattn.pure.variants."""

from __future__ import annotations

TASKS = ("text", "needles", "mqar", "rebind")  # diffattn.data.make_task
BACKENDS = ("auto", "flash_attn", "sdpa", "math")  # diffattn.nn.kernels.attention
CACHES = ("cat", "static")  # diffattn.nn.cache: torch.cat per step, or a preallocated buffer written in place
