"""Lesson 07: the small GPT (diffattn.model.gpt), KV-cache decoding and sampling (diffattn.model.generate), tiny training.

Tolerances: float64 models must match to 1e-10 (cached and full passes differ only in summation order); float32
models at random init (logits of order 0.1) to 1e-5.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

from diffattn.config import GPTConfig, matched_configs  # noqa: E402
from diffattn.nn.cpu import one_thread  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.lessons.lesson07_small_gpt import (  # noqa: E402
    accounting_config,
    paper_shape_params,
    train_copy,
)
from diffattn.model.generate import cache_nbytes, generate, incremental_logits, sample_next  # noqa: E402
from diffattn.model.gpt import GPT, checkpoint_variant, parameter_breakdown  # noqa: E402
from diffattn.pure import accounting  # noqa: E402
from diffattn.pure.attention import lambda_init  # noqa: E402

pytestmark = pytest.mark.torch

MHA = GPTConfig(vocab_size=32, n_layer=2, d_model=32, n_head=4, max_seq_len=24)
GQA = GPTConfig(vocab_size=32, n_layer=2, d_model=32, n_head=4, n_kv_head=2, max_seq_len=24)
VARIANTS = ("baseline", "baseline_2h", "diff_v1", "diff_v2")


@pytest.fixture(autouse=True)
def _one_thread():
    """Tensors here are tiny: a second thread only adds synchronisation, and on a busy machine a lot of it."""
    with one_thread():
        yield


def build(config: GPTConfig, seed: int = 0, dtype=torch.float32) -> GPT:
    torch.manual_seed(seed)
    return GPT(config).to(dtype).eval()


def tokens(batch: int, n: int, vocab: int = 32, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, n), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------------- config


def test_config_fills_defaults_from_the_baseline():
    c = GPTConfig(vocab_size=10, d_model=64, n_head=4)
    assert (c.n_kv_head, c.head_dim, c.ffn_hidden) == (4, 16, 192)  # ⌊8/3·64⌋ = 170 → next multiple of 64
    assert GPTConfig(d_model=768, n_head=12).ffn_hidden == 2048  # 8/3·768 is exactly 2048
    assert accounting.swiglu_width(64, multiple_of=256) == 4 * 64  # LLaMA's rounding would make a small FFN 4·D wide


def test_matched_configs_keep_d_and_kv_heads():
    configs = matched_configs(GQA)
    assert {name: (c.attention, c.n_head, c.n_kv_head, c.head_dim) for name, c in configs.items()} == {
        "baseline": ("baseline", 4, 2, 8),
        "baseline_2h": ("baseline", 8, 2, 8),  # V2's query width: 2h heads of d over the same KV heads
        "diff_v1": ("diff_v1", 4, 2, 8),
        "diff_v2": ("diff_v2", 4, 2, 8),
    }


@pytest.mark.parametrize("kwargs, message", [
    (dict(attention="diff_v3"), "attention must be one of"),
    (dict(backend="cuda"), "backend must be one of"),
    (dict(vocab_size=0), "vocab_size must be > 0"),
    (dict(n_head=4, n_kv_head=3), "multiple of n_kv_head"),
    (dict(d_model=12, n_head=4), "head_dim must be even"),
    (dict(d_model=30, n_head=4), "divisible by n_head"),
    (dict(attention="diff_v1", n_head=4, n_kv_head=1), "both must be even"),
    (dict(attention="diff_v1", d_model=36, n_head=3, head_dim=12), "both must be even"),
    (dict(attention="diff_v1", d_model=32, n_head=4, head_dim=16), "n_head·head_dim == d_model"),
])
def test_config_rejects_impossible_layouts(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        GPTConfig(**kwargs)


# ---------------------------------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("base", [MHA, GQA], ids=["mha", "gqa"])
def test_parameter_counts_match_lesson_04_accounting(base):
    for variant, config in matched_configs(base).items():
        parts = parameter_breakdown(build(config))
        assert parts["total"] == accounting.model_params(accounting_config(base), variant, tied_embeddings=True)["total"]
        expected = accounting.attention_params(variant, base.d_model, base.n_head, base.head_dim, base.n_kv_head)
        assert parts["attention_per_layer"] == expected, variant
        assert sum(v for k, v in parts.items() if k not in ("attention_per_layer", "total")) == parts["total"]


def test_parameter_matching_deltas_per_layer():
    """V1 = baseline + 6d; V2 = baseline + D·h·d + D·h; the 2h baseline = baseline + 2·D·h·d.

    Derived in lesson 04 from the official constructors (microsoft/unilm Diff-Transformer/multihead_flashdiff_1.py and
    Diff-Transformer-V2/multihead_flashdiffv2.py).
    """
    D, h, d = GQA.d_model, GQA.n_head, GQA.head_dim
    per_layer = {v: parameter_breakdown(build(c))["attention_per_layer"] for v, c in matched_configs(GQA).items()}
    assert per_layer["diff_v1"] - per_layer["baseline"] == 6 * d
    assert per_layer["diff_v2"] - per_layer["baseline"] == D * h * d + D * h
    assert per_layer["baseline_2h"] - per_layer["baseline"] == 2 * D * h * d


def test_modules_at_the_7b_shape_match_the_accounting():
    """D = 4096, 32 heads of 128, 8 KV heads, built on the meta device: V2 costs D² + D·h more than the baseline."""
    counts = paper_shape_params()
    assert counts["modules"] == counts["accounting"]
    assert counts["v2_extra"] == 4096**2 + 4096 * 32 and counts["v1_extra"] == 6 * 128


def test_tied_embeddings_share_one_matrix():
    tied, untied = build(GQA), build(GPTConfig(**{**GQA.__dict__, "tie_embeddings": False}))
    assert tied.lm_head.weight is tied.tok_emb.weight
    assert parameter_breakdown(untied)["total"] - parameter_breakdown(tied)["total"] == GQA.vocab_size * GQA.d_model


def test_v1_blocks_get_their_depth():
    model = build(matched_configs(GQA)["diff_v1"])
    assert [block.attn.lambda_init for block in model.blocks] == [lambda_init(0), lambda_init(1)]  # 0.2, 0.356


# ---------------------------------------------------------------------------------------------------- decoding


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("base", [MHA, GQA], ids=["mha", "gqa"])
@pytest.mark.parametrize("prefill", [1, 5])
def test_cached_decoding_equals_the_full_forward_pass(variant, base, prefill):
    model = build(matched_configs(base)[variant], dtype=torch.float64)
    x = tokens(2, 9)
    with torch.no_grad():
        full = model(x)
    cached, caches = incremental_logits(model, x, prefill=prefill)
    torch.testing.assert_close(cached, full, atol=1e-10, rtol=0)
    assert [len(c) for c in caches] == [9, 9]


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_decoding_in_float32(variant):
    model = build(matched_configs(GQA)[variant])
    x = tokens(2, 9)
    with torch.no_grad():
        full = model(x)
    torch.testing.assert_close(incremental_logits(model, x, prefill=3)[0], full, atol=1e-5, rtol=0)


@settings(max_examples=10, deadline=None)
@given(variant=st.sampled_from(VARIANTS), n=st.integers(2, 8), position=st.integers(0, 7), seed=st.integers(0, 99))
def test_logits_never_depend_on_later_tokens(variant, n, position, seed):
    position = min(position, n - 1)
    model = build(matched_configs(GQA)[variant], dtype=torch.float64)
    x = tokens(1, n, seed=seed)
    changed = x.clone()
    changed[0, position] = (x[0, position] + 1) % GQA.vocab_size
    with torch.no_grad():
        torch.testing.assert_close(model(changed)[:, :position], model(x)[:, :position], atol=1e-12, rtol=0)


def test_kv_cache_bytes_are_the_same_for_every_variant():
    """8 KV heads under 32 heads (the exercise's config): the measured cache of all four models is the baseline's."""
    base = GPTConfig(vocab_size=16, n_layer=2, d_model=64, n_head=32, n_kv_head=8, max_seq_len=16)  # d = 2
    measured, shapes = {}, {}
    for variant, config in matched_configs(base).items():
        _, caches = incremental_logits(build(config), tokens(1, 7, vocab=16), prefill=2)
        measured[variant] = cache_nbytes(caches)
        shapes[variant] = (tuple(caches[0].k.shape), tuple(caches[0].v.shape))
    per_token = accounting.kv_cache_bytes_per_token("baseline", 2, 32, 2, 8, bytes_per_value=4)
    assert set(measured.values()) == {7 * per_token}
    assert shapes["diff_v2"] == shapes["baseline"] == ((1, 7, 8, 2), (1, 7, 8, 2))
    assert shapes["diff_v1"] == ((1, 7, 8, 2), (1, 7, 4, 4))  # K: 2·(h_kv/2) heads of d; V: h_kv/2 heads of 2d


# ---------------------------------------------------------------------------------------------------- generation


@pytest.mark.parametrize("variant", VARIANTS)
def test_greedy_generation_is_the_same_with_and_without_the_cache(variant):
    model = build(matched_configs(GQA)[variant], dtype=torch.float64)
    prompt = tokens(3, 4)
    with_cache = generate(model, prompt, 8, temperature=0.0)
    assert with_cache.shape == (3, 12) and torch.equal(with_cache[:, :4], prompt)
    assert torch.equal(with_cache, generate(model, prompt, 8, temperature=0.0, use_cache=False))


def test_sampling_is_reproducible_with_a_seeded_generator():
    model = build(GQA)
    prompt = tokens(2, 3)
    runs = [generate(model, prompt, 10, temperature=1.5, top_k=8, generator=torch.Generator().manual_seed(5))
            for _ in range(2)]
    assert torch.equal(runs[0], runs[1])
    other = generate(model, prompt, 10, temperature=1.5, top_k=8, generator=torch.Generator().manual_seed(6))
    assert not torch.equal(runs[0], other)


def test_top_k_restricts_sampling_to_the_k_largest_logits():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]]).expand(400, 4)
    picks = sample_next(logits, temperature=5.0, top_k=2, generator=torch.Generator().manual_seed(0))
    assert set(picks.tolist()) == {1, 3}
    assert torch.equal(sample_next(logits, top_k=1, generator=torch.Generator()), torch.full((400,), 1))
    assert torch.equal(sample_next(logits, temperature=0.0), torch.full((400,), 1))


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-1.0), "temperature must be finite and >= 0"),
    (dict(temperature=float("nan")), "temperature must be finite and >= 0"),
    (dict(top_k=0), "top_k must be in"),
    (dict(top_k=33), "top_k must be in"),
    (dict(max_new_tokens=30), "exceeds max_seq_len"),
    (dict(max_new_tokens=-1), "max_new_tokens must be >= 0"),
])
def test_generation_rejects_bad_settings(kwargs, message):
    kwargs = {"max_new_tokens": 2, **kwargs}
    with pytest.raises(ConfigError, match=message):
        generate(build(GQA), tokens(1, 3), **kwargs)


# ---------------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("make, message", [
    (lambda: torch.zeros(1, 4), "integer tensor"),
    (lambda: torch.zeros(4, dtype=torch.long), r"\(batch, seq\)"),
    (lambda: torch.full((1, 4), 32), r"token ids must lie in \[0, 32\)"),
    (lambda: torch.full((1, 4), -1), r"token ids must lie in"),
    (lambda: torch.zeros(1, 25, dtype=torch.long), "exceed max_seq_len 24"),
    (lambda: torch.zeros(1, 0, dtype=torch.long), "at least one token"),
])
def test_forward_rejects_bad_tokens(make, message):
    with pytest.raises(ConfigError, match=message):
        build(GQA)(make())


def test_forward_rejects_a_device_mismatch_and_a_wrong_cache_count():
    model = build(GQA)
    with pytest.raises(ConfigError, match="on meta but the model is on cpu"):
        model(torch.zeros(1, 3, dtype=torch.long, device="meta"))
    with pytest.raises(ConfigError, match="one KV cache per block"):
        model(tokens(1, 3), model.new_caches()[:1])


# ---------------------------------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("saved, loaded", [("diff_v2", "baseline"), ("baseline", "diff_v1"), ("diff_v1", "diff_v2")])
def test_loading_another_variants_checkpoint_names_both_variants(saved, loaded):
    configs = matched_configs(GQA)
    state = build(configs[saved]).state_dict()
    assert checkpoint_variant(state) == saved
    with pytest.raises(ConfigError, match=f"checkpoint is a {saved} model but this GPT has attention='{loaded}'"):
        build(configs[loaded]).load_state_dict(state)


def test_loading_a_checkpoint_of_another_shape_or_depth_is_a_config_error():
    configs = matched_configs(GQA)
    with pytest.raises(ConfigError, match=r"blocks.0.attn.q_proj.weight has shape \(64, 32\), this model's is \(32, 32\)"):
        build(configs["baseline"]).load_state_dict(build(configs["baseline_2h"]).state_dict())
    with pytest.raises(ConfigError, match=r"missing \['blocks.1"):
        build(GQA).load_state_dict(build(GPTConfig(**{**GQA.__dict__, "n_layer": 1})).state_dict())


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_checkpoint_round_trips(variant):
    config = matched_configs(GQA)[variant]
    source, target = build(config, seed=0), build(config, seed=1)
    target.load_state_dict(source.state_dict())
    x = tokens(1, 5)
    with torch.no_grad():
        assert torch.equal(target(x), source(x))


# ---------------------------------------------------------------------------------------------------- training


def test_every_variant_learns_the_copy_task_on_cpu():
    """40 AdamW steps: the copy loss must fall well below ln 15, the best any model that cannot copy can do."""
    base = GPTConfig(vocab_size=16, n_layer=2, d_model=32, n_head=4, n_kv_head=2, max_seq_len=16)
    no_copying = math.log(base.vocab_size - 1)  # the copied symbols are uniform over the 15 non-SEP tokens
    for variant, config in matched_configs(base).items():
        _, losses = train_copy(config, steps=40, batch=16, lr=1e-2, seed=0, prefix=6)
        first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
        assert first > no_copying - 0.1, (variant, first)  # it starts at chance
        assert last < no_copying - 0.25, (variant, last)


def test_a_forward_pass_checks_cheaply(monkeypatch):
    """Checks at the edges, messages only on failure: a forward pass of every variant calls `require` (which formats
    its message before it is called) only inside exercise 07.1's DIFF V2 functions, whose refusals the exercise
    specifies; the model, the modules, RoPE and the kernels test plain conditions and format a message only to raise."""
    import inspect
    import sys

    from diffattn.core import errors

    callers = []

    def recording(condition, message):
        callers.append(inspect.stack()[1].function)
        return errors.require.__wrapped__(condition, message)

    recording.__wrapped__ = errors.require
    models = [GPT(config).eval() for config in matched_configs(MHA).values()]  # constructors validate: not counted
    for name, module in list(sys.modules.items()):
        if name.startswith("diffattn") and getattr(module, "require", None) is errors.require:
            monkeypatch.setattr(module, "require", recording)
    for model in models:
        with torch.no_grad():
            model(torch.randint(0, MHA.vocab_size, (2, 8)))
    assert set(callers) <= {"check_pairs_share_kv", "query_head_groups", "diff_v2_gqa_attention"}, set(callers)
    with pytest.raises(ConfigError, match=r"token ids must lie in \[0, 32\) \(got 0 … 40\)"):
        GPT(MHA)(torch.tensor([[0, 40]]))


def test_compiled_model_traces_in_one_graph_whatever_the_batch():
    """The input checks are plain conditions on shapes, dtypes and devices under torch.compile: no graph break, and a
    batch whose smallest token differs does not recompile (the message used to be built from tokens.min())."""
    for variant, config in matched_configs(MHA).items():
        torch._dynamo.reset()
        model = GPT(config).eval()
        with torch.no_grad():
            explained = torch._dynamo.explain(model)(torch.randint(0, 32, (2, 8)))
            assert explained.graph_break_count == 0, (variant, [str(b.reason)[:200] for b in explained.break_reasons])
            compiled = torch.compile(model, backend="eager", fullgraph=True)
            for low in (0, 5, 17):
                compiled(torch.randint(low, 32, (2, 8)))
