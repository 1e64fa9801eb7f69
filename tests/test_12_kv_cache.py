"""Lesson 12: the preallocated KV cache (diffattn.nn.cache.StaticKVCache) against the torch.cat one.

Decode is timed on the static cache (a torch.cat cache reallocates the whole cache every token, so its step time
measures the allocator); these tests prove the two give the same model: identical greedy tokens and logits equal to
1e-10 in float64 (the same values in a different buffer: the kernels see equal numbers), for every variant.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from diffattn.config import GPTConfig, matched_configs  # noqa: E402
from diffattn.nn.cpu import one_thread  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.model.generate import cache_nbytes, generate, incremental_logits  # noqa: E402
from diffattn.model.gpt import GPT  # noqa: E402
from diffattn.pure.variants import VARIANTS  # noqa: E402
from diffattn.nn.cache import KVCache, StaticKVCache, new_cache  # noqa: E402

pytestmark = pytest.mark.torch

GQA = GPTConfig(vocab_size=32, n_layer=2, d_model=32, n_head=4, n_kv_head=2, max_seq_len=24)


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


def build(variant: str, dtype=torch.float64) -> GPT:
    torch.manual_seed(0)
    return GPT(matched_configs(GQA)[variant]).to(dtype).eval()


def prompts(batch: int, n: int) -> torch.Tensor:
    return torch.randint(0, 32, (batch, n), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("variant", VARIANTS)
def test_greedy_tokens_are_identical_on_both_caches(variant):
    model = build(variant, torch.float32)
    prompt = prompts(3, 5)
    cat = generate(model, prompt, 12, temperature=0.0, cache="cat")
    static = generate(model, prompt, 12, temperature=0.0, cache="static")
    assert cat.shape == (3, 17)
    assert torch.equal(cat, static), f"{variant}: greedy tokens differ between the cat and the static cache"


@pytest.mark.parametrize("variant", VARIANTS)
def test_decoded_logits_and_cached_values_agree(variant):
    model = build(variant)
    seq = prompts(2, 10)
    cat_logits, cat_caches = incremental_logits(model, seq, prefill=4, cache="cat")
    static_logits, static_caches = incremental_logits(model, seq, prefill=4, cache="static")
    assert (static_logits - cat_logits).abs().max().item() < 1e-10
    for cat, static in zip(cat_caches, static_caches):
        assert len(static) == len(cat) == 10
        assert torch.equal(static.k, cat.k) and torch.equal(static.v, cat.v)
    assert cache_nbytes(static_caches) == cache_nbytes(cat_caches)  # filled positions, not the reserved capacity


def test_the_static_cache_writes_in_place_and_never_reallocates():
    cache = StaticKVCache(capacity=6)
    g = torch.Generator().manual_seed(0)
    first = cache.update(torch.randn(2, 3, 4, 8, generator=g), torch.randn(2, 3, 4, 16, generator=g))
    k_address, v_address = cache.k_buffer.data_ptr(), cache.v_buffer.data_ptr()
    for step in range(3):
        k_new, v_new = torch.randn(2, 1, 4, 8, generator=g), torch.randn(2, 1, 4, 16, generator=g)
        k, v = cache.update(k_new, v_new)
        assert k.shape == (2, 4 + step, 4, 8) and v.shape == (2, 4 + step, 4, 16)
        assert torch.equal(k[:, -1:], k_new) and torch.equal(v[:, -1:], v_new)
        assert torch.equal(k[:, :3], first[0])  # what was written stays
    assert (cache.k_buffer.data_ptr(), cache.v_buffer.data_ptr()) == (k_address, v_address)
    assert cache.k.data_ptr() == k_address and len(cache) == 6


def test_the_cat_cache_reallocates_every_step():
    """Why decode is not timed on it: each token copies the whole cache into a new tensor."""
    cache = KVCache()
    cache.update(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    addresses = {cache.update(torch.ones(1, 1, 1, 4), torch.ones(1, 1, 1, 4))[0].data_ptr() for _ in range(3)}
    assert len(addresses) == 3


@pytest.mark.parametrize("make, message", [
    (lambda: StaticKVCache(0), "capacity must be an integer >= 1"),
    (lambda: new_cache("paged", 4), "cache must be one of cat, static"),
    (lambda: StaticKVCache(2).update(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4)), "holds 2 positions"),
    (lambda: StaticKVCache(4).update(torch.zeros(1, 3, 1, 4), torch.zeros(1, 2, 1, 4)), "same number of tokens"),
])
def test_bad_caches_fail_with_one_line(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_a_full_static_cache_and_a_wrong_layout_are_refused():
    cache = StaticKVCache(3)
    cache.update(torch.zeros(1, 3, 2, 4), torch.zeros(1, 3, 2, 4))
    with pytest.raises(ConfigError, match="3 \\+ 1 do not fit"):
        cache.update(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4))
    other = StaticKVCache(4)
    other.update(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4))
    with pytest.raises(ConfigError, match="do not match the cache"):
        other.update(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 4))
    with pytest.raises(ConfigError, match="cache must be one of"):
        generate(build("baseline"), prompts(1, 2), 2, temperature=0.0, cache="paged")
