"""Per-layer key/value caches for decoding: keep what every past token wrote, append each new step.

Two ways to hold it, same interface (`len(cache)`, `cache.update(k_new, v_new) -> (k, v)`, `cache.k`, `cache.v`):

    KVCache        torch.cat of the old cache and the new token: reallocates and copies the whole cache every
                   step (O(L) bytes per token), and each step's time depends on the allocator's state
    StaticKVCache  one buffer of `capacity` positions allocated at the first update and written in place; a step
                   copies only the new token's K/V and returns views of the filled prefix. Addresses never change,
                   which is what serving stacks and CUDA graphs need, and what a decode benchmark must time (lesson 12)
"""

from __future__ import annotations

import torch
from torch import Tensor

from diffattn.core.errors import require
from diffattn.core.names import CACHES


def _check_new(k_new: Tensor, v_new: Tensor) -> int:
    n_k, n_v = k_new.shape[1], v_new.shape[1]
    require(n_k == n_v, f"k and v must add the same number of tokens ({n_k} vs {n_v})")
    return n_k


def _check_fits(k_new: Tensor, v_new: Tensor, k: Tensor, v: Tensor) -> None:
    """The new keys/values must have the cache's batch, heads and widths (the sequence dim may differ)."""
    same_rows = k_new.shape[0] == k.shape[0] and k_new.shape[2:] == k.shape[2:]
    require(
        same_rows and v_new.shape[2:] == v.shape[2:],
        f"new keys/values {tuple(k_new.shape)}/{tuple(v_new.shape)} do not match the cache "
        f"{tuple(k.shape)}/{tuple(v.shape)}",
    )


class KVCache:
    """Keys and values of one attention layer, (b, L, heads, width), growing along the seq dim by torch.cat.

    Keys are cached after RoPE: rotating by absolute position once is enough, because q·k after rotation depends
    only on the distance between the two positions. Appending with torch.cat copies the cache each step (O(L) per
    token); that is fine for a course and keeps the code obvious. `StaticKVCache` preallocates instead.
    """

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[1]

    def update(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Append k_new, v_new (b, n, heads, ·) and return every cached key and value (b, L + n, heads, ·)."""
        _check_new(k_new, v_new)
        if self.k is None or self.v is None:
            self.k, self.v = k_new, v_new
        else:
            _check_fits(k_new, v_new, self.k, self.v)
            self.k, self.v = torch.cat((self.k, k_new), dim=1), torch.cat((self.v, v_new), dim=1)
        return self.k, self.v


class StaticKVCache:
    """Keys and values of one attention layer in preallocated (b, capacity, heads, width) buffers.

    The buffers take the batch, heads, widths, dtype and device of the first update (the prefill), so one class
    serves every variant's layout (V1 caches 2d-wide values). `update` writes positions L … L+n−1 in place and
    returns the views k_buffer[:, :L+n], v_buffer[:, :L+n]: the same values a `KVCache` returns, without a copy.
    """

    def __init__(self, capacity: int) -> None:
        require(isinstance(capacity, int) and capacity >= 1, f"capacity must be an integer >= 1 (got {capacity!r})")
        self.capacity = capacity
        self.k_buffer: Tensor | None = None
        self.v_buffer: Tensor | None = None
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @property
    def k(self) -> Tensor | None:
        """The cached keys (b, L, heads, ·): a view of the filled part of the buffer."""
        return None if self.k_buffer is None else self.k_buffer[:, :self.length]

    @property
    def v(self) -> Tensor | None:
        return None if self.v_buffer is None else self.v_buffer[:, :self.length]

    def update(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Write k_new, v_new (b, n, heads, ·) at positions L … L+n−1; return views of all L + n positions."""
        n = _check_new(k_new, v_new)
        if self.k_buffer is None or self.v_buffer is None:
            b, _, *rest_k = k_new.shape
            self.k_buffer = k_new.new_empty((b, self.capacity, *rest_k))
            self.v_buffer = v_new.new_empty((b, self.capacity, *v_new.shape[2:]))
        else:
            _check_fits(k_new, v_new, self.k_buffer, self.v_buffer)
        end = self.length + n
        require(end <= self.capacity, f"the cache holds {self.capacity} positions; {self.length} + {n} do not fit")
        self.k_buffer[:, self.length:end] = k_new  # in place: the buffer's address never changes
        self.v_buffer[:, self.length:end] = v_new
        self.length = end
        return self.k_buffer[:, :end], self.v_buffer[:, :end]



Cache = KVCache | StaticKVCache  # what the attention modules accept


def new_cache(kind: str, capacity: int) -> Cache:
    """One empty cache of `kind` ("cat" or "static"); `capacity` (positions) sizes a static one."""
    require(kind in CACHES, f"cache must be one of {', '.join(CACHES)} (got {kind!r})")
    return KVCache() if kind == "cat" else StaticKVCache(capacity)
