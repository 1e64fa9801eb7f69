"""A per-layer key/value cache for decoding: keep what every past token wrote, append each new step."""

from __future__ import annotations

import torch
from torch import Tensor

from diffattn.errors import require


class KVCache:
    """Keys and values of one attention layer, (b, L, heads, width), growing along the seq dim.

    Keys are cached after RoPE: rotating by absolute position once is enough, because q·k after rotation depends
    only on the distance between the two positions. Appending with torch.cat copies the cache each step (O(L) per
    token); that is fine for a course and keeps the code obvious. A serving stack preallocates instead.
    """

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[1]

    def update(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Append k_new, v_new (b, n, heads, ·) and return every cached key and value (b, L + n, heads, ·)."""
        n_k, n_v = k_new.shape[1], v_new.shape[1]
        require(n_k == n_v, f"k and v must add the same number of tokens ({n_k} vs {n_v})")
        if self.k is None or self.v is None:
            self.k, self.v = k_new, v_new
        else:
            same_rows = k_new.shape[0] == self.k.shape[0] and k_new.shape[2:] == self.k.shape[2:]
            require(
                same_rows and v_new.shape[2:] == self.v.shape[2:],
                f"new keys/values {tuple(k_new.shape)}/{tuple(v_new.shape)} do not match the cache "
                f"{tuple(self.k.shape)}/{tuple(self.v.shape)}",
            )
            self.k, self.v = torch.cat((self.k, k_new), dim=1), torch.cat((self.v, v_new), dim=1)
        return self.k, self.v
