"""Lesson 04: parameter, KV-cache, FLOP and decode-intensity accounting for baseline / DIFF V1 / DIFF V2.

Graded tests (04.1, 04.2) call `impl.<name>` and pin the official module shapes (unilm Diff-Transformer/ V1 and V2
modules); the known-wrong implementations in tests/wrong/w04_*.py must fail them. The rest check the reference's own
invariants. All arithmetic is on integers, so comparisons are exact unless a tolerance is stated. A graded check's
message names the variant and the layout, and what it expected and got.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from diffattn.core.errors import ConfigError
from diffattn.lessons import lesson04_accounting as lesson
from diffattn.pure import accounting as acc
from tests.feedback import refuses, show

PROPERTY = settings(derandomize=True, max_examples=60, deadline=None)
# PINNED: derandomized Hypothesis (conftest.py's profiles) seeds a property test from the test's own source, so adding
# failure messages to a graded property test would change the examples it draws. Such a test carries @seed(...) with
# the seed its source had before the messages were added: the examples, and so every implementation's points, stay
# exactly as they were.


@st.composite
def layouts(draw):
    """(hidden, heads, head_dim, kv_heads) valid for every variant: even h and h_kv, h_kv | h, h·d = D."""
    kv_heads = 2 * draw(st.integers(1, 8))
    heads = kv_heads * draw(st.integers(1, 8))
    head_dim = draw(st.integers(1, 256))
    return heads * head_dim, heads, head_dim, kv_heads


# ------------------------------------------------------------------------------------------------ graded: 04.1


def layout_of(hidden, heads, d, kv=None):
    """'D=1024, h=16, d=64, kv_heads=8': a module's shape as the messages name it."""
    return f"D={hidden}, h={heads}, d={d}" + ("" if kv is None else f", kv_heads={kv}")


def counted(got, want, whose: str = "") -> str:
    """'expected 4,194,688, got 4,194,560 (−128)': the gap often names the weights that are missing or extra.
    `whose` names where the expected count comes from: "the baseline's " gives "expected the baseline's 131,072"."""
    def integer(n):
        return isinstance(n, int) and not isinstance(n, bool)
    wanted = f"expected {whose}{want:,}" if integer(want) else f"expected {whose}{show(want)}"
    if not (integer(got) and integer(want)):
        return f"{wanted}, got {show(got)}"
    return f"{wanted}, got {got:,} ({got - want:+,})".replace("(-", "(−")


BASELINES = "the baseline's "  # counted(..., BASELINES): "expected the baseline's 131,072"
NAMES = {"baseline": "baseline", "diff_v1": "DIFF V1", "diff_v2": "DIFF V2", "baseline_2h": "2h-head baseline"}


@pytest.mark.grade("04.1", points=1)
def test_official_example_sizes(impl):
    """example.py: MultiheadDiffAttn(1024, depth, 8 heads) vs a 16-head baseline; and (8 heads, 4 KV) vs (16, 8)."""
    got = impl.attention_params("baseline", 1024, 16, 64)
    assert got == 4_194_304, f"baseline attention parameters (D=1024, h=16, d=64): {counted(got, 4_194_304)}"
    got = impl.attention_params("diff_v1", 1024, 16, 64)
    assert got == 4_194_688, (f"DIFF V1 attention parameters (D=1024, h=16, d=64): {counted(got, 4_194_688)}; "
                              f"V1 adds 4·64 λ and a 2·64 subln weight to the baseline's 4,194,304")
    got = impl.attention_params("baseline", 1024, 16, 64, 8)
    assert got == 3_145_728, (f"baseline attention parameters (D=1024, h=16, d=64, kv_heads=8): "
                              f"{counted(got, 3_145_728)}")
    got = impl.attention_params("diff_v1", 1024, 16, 64, 8)
    assert got == 3_146_112, (f"DIFF V1 attention parameters (D=1024, h=16, d=64, kv_heads=8): "
                              f"{counted(got, 3_146_112)}; V1 adds 6·64 to the baseline's 3,145,728")


@pytest.mark.grade("04.1", points=1)
def test_v2_and_its_2h_peer_at_7b_with_gqa8(impl):
    """Worked examples: 41.9M → 58.9M (V2) vs 75.5M (2h heads), and the small 1024/16/64/8 one."""
    for variant, args, want in [("baseline", (4096, 32, 128, 8), 41_943_040),
                                ("diff_v2", (4096, 32, 128, 8), 58_851_328),
                                ("baseline_2h", (4096, 32, 128, 8), 75_497_472),
                                ("diff_v2", (1024, 16, 64, 8), 4_210_688),
                                ("baseline_2h", (1024, 16, 64, 8), 5_242_880)]:
        got = impl.attention_params(variant, *args)
        assert got == want, f"{NAMES[variant]} attention parameters ({layout_of(*args)}): {counted(got, want)}"


@pytest.mark.grade("04.1", points=1)
@PROPERTY
# the seed this test's source had before its failure messages: the same examples (see PINNED)
@seed(0xfbef266e0bdbbe2d4e60f5f2fb38eadc07ba36166eb2cacdc36b4bf90182fb8df84b0f049ac8c671eddc59447c3c815d)
@given(layouts())
def test_what_each_variant_adds_for_any_layout(impl, layout):
    hidden, heads, d, kv = layout
    shape = layout_of(hidden, heads, d, kv)
    base = impl.attention_params("baseline", hidden, heads, d, kv)
    want = hidden * heads * d + 2 * hidden * kv * d + heads * d * hidden  # W_Q, W_K + W_V, W_O
    assert base == want, (f"baseline attention parameters ({shape}): {counted(base, want)}; "
                          f"W_Q + W_K + W_V + W_O = D·h·d + 2·D·kv_heads·d + h·d·D")
    v1 = impl.attention_params("diff_v1", hidden, heads, d, kv)
    assert v1 - base == 6 * d, (f"DIFF V1 minus baseline attention parameters ({shape}): {counted(v1 - base, 6 * d)}; "
                                f"V1 adds 4 λ vectors of d and an RMSNorm(2d) weight, 6·d")
    v2 = impl.attention_params("diff_v2", hidden, heads, d, kv)
    want = hidden * heads * d + hidden * heads  # second half of W_Q, plus W_λ: D → h
    assert v2 - base == want, (f"DIFF V2 minus baseline attention parameters ({shape}): {counted(v2 - base, want)}; "
                               f"V2 adds the second half of W_Q (D·h·d) and W_λ (D·h)")
    wide = impl.attention_params("baseline_2h", hidden, heads, d, kv)
    want = heads * d * hidden - hidden * heads
    assert wide - v2 == want, (f"2h-head baseline minus DIFF V2 attention parameters ({shape}): "
                               f"{counted(wide - v2, want)}; the 2h model's second half of W_O (h·d·D) less W_λ (D·h)")


@pytest.mark.grade("04.1", points=1)
def test_attention_params_rejects_impossible_layouts(impl):
    for args, why in [
        (("diff_v1", 1024, 15, 64), "V1 needs h/2 differential heads: h must be even"),
        (("diff_v1", 4096, 32, 128, 1), "V1 needs h_kv/2 KV heads: kv_heads must be even"),
        (("baseline", 4096, 32, 128, 5), "kv_heads must divide h"),
        (("diff_v2", 4096, 32, 64), "h·d must equal D"),
        (("baseline", 0, 32, 128), "sizes must be positive: D = 0"),
        (("baseline", -4096, -32, 128), "sizes must be positive, even when h·d = D holds"),
        (("baseline", 4096, 32, 128, -8), "kv_heads must be positive"),
        (("baseline", 4096, 32, 128, 0), "kv_heads must be positive"),
        (("baseline", 4096, 0, 128), "heads must be positive"),
        (("diff_v2", 0, 0, 128), "D and heads must be positive"),
        (("diff_v3", 4096, 32, 128), "unknown variant"),
    ]:
        with refuses(ValueError, f"attention_params{args} ({why})"):
            impl.attention_params(*args)


@pytest.mark.grade("04.1", points=1)
def test_attention_params_checks_the_whole_layout_for_every_variant(impl):
    """Every variant refuses what the module docstring lists, even where its own formula would not need the check
    (the baseline count never divides h by h_kv; only DIFF V1 halves h_kv, but any odd h_kv is refused)."""
    for variant in acc.VARIANTS:
        for args, why in [((4096, 32, 128, 5), "5 KV heads do not divide 32 query heads"),
                          ((768, 6, 128, 4), "4 KV heads do not divide 6 query heads (though 4 divides 2h = 12)"),
                          ((4096, 32, 128, 64), "more KV heads than query heads"),
                          ((4096, 32, 128, -32), "negative kv_heads"),
                          ((4096, 32, -128), "negative head_dim, with a negative h·d ≠ D"),
                          ((-4096, 32, -128), "D and head_dim both negative, though h·d = D")]:
            with refuses(ValueError, f"attention_params({variant!r}, {', '.join(map(str, args))}) ({why})"):
                impl.attention_params(variant, *args)
    for args in [(1536, 12, 128, 3), (4096, 32, 128, 1), (1536, 12, 128, 12 // 4)]:
        with refuses(ValueError, f"attention_params('diff_v1', {', '.join(map(str, args))}) (odd kv_heads: V1 has "
                                 f"kv_heads/2 KV heads)"):
            impl.attention_params("diff_v1", *args)


@pytest.mark.grade("04.1", points=1)
@PROPERTY
@given(st.integers(1, 2**20).map(lambda k: 4 * k), st.integers(2**26, 2**40), st.sampled_from([1, 2]))
def test_attention_params_exact_for_huge_sizes(impl, heads, head_dim, group):
    """"Count integers exactly": any positive sizes, however large; a float step (h / 2) rounds beyond 2**53."""
    kv, hidden = heads // group, heads * head_dim  # kv even: heads is a multiple of 4
    base = hidden * heads * head_dim + 2 * hidden * kv * head_dim + heads * head_dim * hidden
    for variant, want in [("baseline", base), ("diff_v1", base + 6 * head_dim),
                          ("diff_v2", base + hidden * heads * head_dim + hidden * heads),
                          ("baseline_2h", base + 2 * hidden * heads * head_dim)]:
        got = impl.attention_params(variant, hidden, heads, head_dim, kv)
        assert got == want, f"{NAMES[variant]} attention parameters ({layout_of(hidden, heads, head_dim, kv)}): " \
                            f"{counted(got, want)}; count in integers, not floats"


# ------------------------------------------------------------------------------------------------ graded: 04.2


def cache_of(variant, layers, heads, d, kv=None, bytes_per_value=None):
    """'DIFF V2 KV-cache bytes per token (32 layers, h=32, d=128, kv_heads=8)', as the messages name it."""
    sizes = f"{layers} layer{'s' * (layers != 1)}, h={heads}, d={d}" + ("" if kv is None else f", kv_heads={kv}")
    sizes += "" if bytes_per_value is None else f", {bytes_per_value} byte{'s' * (bytes_per_value != 1)} per value"
    return f"{NAMES[variant]} KV-cache bytes per token ({sizes})"


@pytest.mark.grade("04.2", points=1)
def test_gqa_v2_cache_equals_gqa_baseline(impl):
    """A common exercise: GQA + V2 with 8 KV heads and 32 query heads: the KV cache equals the (8, 32) baseline's."""
    baseline = impl.kv_cache_bytes_per_token("baseline", 32, 32, 128, 8)
    assert baseline == 131_072, (f"{cache_of('baseline', 32, 32, 128, 8)}: {counted(baseline, 131_072)}; "
                                 f"32 layers × 2 (K, V) × 8 heads × 128 × 2 bytes")
    got = impl.kv_cache_bytes_per_token("diff_v2", 32, 32, 128, 8)
    assert got == baseline, f"{cache_of('diff_v2', 32, 32, 128, 8)}: {counted(got, baseline, BASELINES)}"
    got = impl.kv_cache_bytes_per_token("baseline_2h", 32, 32, 128, 8)
    assert got == baseline, f"{cache_of('baseline_2h', 32, 32, 128, 8)}: {counted(got, baseline, BASELINES)}"
    # an odd number of KV heads is fine outside V1 (MQA: one KV head; GQA 12 over 3): the same 2·h_kv·d per layer
    mqa, v2_mqa = (impl.kv_cache_bytes_per_token(v, 32, 32, 128, 1) for v in ("baseline", "diff_v2"))
    assert mqa == v2_mqa, f"{cache_of('diff_v2', 32, 32, 128, 1)} (MQA): {counted(v2_mqa, mqa, BASELINES)}"
    assert v2_mqa == 16_384, f"{cache_of('diff_v2', 32, 32, 128, 1)} (MQA): {counted(v2_mqa, 16_384)}"
    got = impl.kv_cache_bytes_per_token("diff_v2", 2, 12, 64, 3)
    want = 2 * 2 * 3 * 64 * 2
    assert got == want, (f"{cache_of('diff_v2', 2, 12, 64, 3)}: {counted(got, want)}; "
                         f"2 layers × 2 (K, V) × 3 KV heads × 64 × 2 bytes")


@pytest.mark.grade("04.2", points=1)
def test_v1_cache_equals_baseline(impl):
    """V1 halves the head count, not the width: h_kv/2 KV heads of keys 2d and values 2d = the baseline's cache."""
    for kv in (None, 8):
        v1 = impl.kv_cache_bytes_per_token("diff_v1", 32, 32, 128, kv)
        base = impl.kv_cache_bytes_per_token("baseline", 32, 32, 128, kv)
        assert v1 == base, (f"{cache_of('diff_v1', 32, 32, 128, kv)}: {counted(v1, base, BASELINES)}; "
                            f"V1 caches h_kv/2 KV heads of keys and values both 2d wide")
    got = impl.kv_cache_bytes_per_token("diff_v1", 32, 32, 128)
    assert got == 524_288, f"{cache_of('diff_v1', 32, 32, 128)}: {counted(got, 524_288)}, LLaMA-7B's 512 KiB"
    got = impl.kv_cache_bytes_per_token("diff_v1", 1, 16, 64, 8, bytes_per_value=4)
    assert got == 4_096, f"{cache_of('diff_v1', 1, 16, 64, 8, 4)}: {counted(got, 4_096)}"


@pytest.mark.grade("04.2", points=1)
@PROPERTY
# the seed this test's source had before its failure messages: the same examples (see PINNED)
@seed(0xb3c46a40b34c356d4c7530450d891566f231d30eb5cbda7228bb594a5688722e0076173c8f353989c6850371c7ab6d03)
@given(layouts(), st.integers(1, 96), st.sampled_from([1, 2, 4]))
def test_cache_is_the_baseline_cache_for_every_variant(impl, layout, layers, bytes_per_value):
    _, heads, d, kv = layout
    expected = layers * 2 * kv * d * bytes_per_value
    for variant in acc.VARIANTS:
        got = impl.kv_cache_bytes_per_token(variant, layers, heads, d, kv, bytes_per_value)
        assert got == expected, (f"{cache_of(variant, layers, heads, d, kv, bytes_per_value)}: "
                                 f"{counted(got, expected, BASELINES)} = layers × 2 (K, V) × kv_heads × d × bytes")


@pytest.mark.grade("04.2", points=1)
def test_kv_cache_rejects_impossible_layouts(impl):
    for args, why in [
        (("diff_v1", 32, 31, 128), "odd h: no h/2 differential heads"),
        (("diff_v1", 32, 32, 128, 1), "MQA cannot be halved for V1"),
        (("diff_v2", 32, 32, 128, 3), "kv_heads must divide h, and so keep V2's pairs in one group"),
        (("baseline", 0, 32, 128), "layers must be positive"),
        (("baseline", 32, -32, 128, -8), "heads and kv_heads must be positive"),
        (("baseline", 32, 32, -128), "head_dim must be positive"),
        (("baseline", 32, 32, 128, 0), "kv_heads must be positive"),
        (("baseline", 32, 0, 128, 8), "heads must be positive"),
        (("baseline", 32, -32, 128, 8), "heads must be positive"),
        (("baseline", 32, 32, 128, 8, 0), "bytes per value must be positive"),
        (("diff_v3", 32, 32, 128), "unknown variant"),
    ]:
        with refuses(ValueError, f"kv_cache_bytes_per_token{args} ({why})"):
            impl.kv_cache_bytes_per_token(*args)


@pytest.mark.grade("04.2", points=1)
def test_kv_cache_checks_every_size_and_the_whole_layout_for_every_variant(impl):
    """layers ≥ 1 and bytes_per_value ≥ 1 on both sides of zero, and the module docstring's layout rules for every
    variant, though the baseline's cache (layers · 2 · h_kv · d · bytes) never uses h."""
    for variant in acc.VARIANTS:
        for args, why in [((-32, 32, 128, 8), "negative layers"),
                          ((32, 32, 128, 8, -2), "negative bytes per value"),
                          ((-32, 32, 128, 8, -2), "negative layers and bytes per value (a positive product)"),
                          ((32, 32, 128, 5), "5 KV heads do not divide 32 query heads"),
                          ((32, 6, 128, 4), "4 KV heads do not divide 6 query heads (though 4 divides 2h = 12)"),
                          ((32, 32, 128, 64), "more KV heads than query heads"),
                          ((32, -32, -128, -8), "negative heads, head_dim and kv_heads (a negative product)")]:
            with refuses(ValueError, f"kv_cache_bytes_per_token({variant!r}, {', '.join(map(str, args))}) ({why})"):
                impl.kv_cache_bytes_per_token(variant, *args)
    with refuses(ValueError, "kv_cache_bytes_per_token('diff_v1', 32, 12, 128, 3) (odd kv_heads: V1 has "
                             "kv_heads/2 KV heads)"):
        impl.kv_cache_bytes_per_token("diff_v1", 32, 12, 128, 3)


@pytest.mark.grade("04.2", points=1)
@PROPERTY
@given(st.integers(1, 2**20).map(lambda k: 2 * k), st.integers(2**26, 2**40), st.integers(1, 2**30),
       st.sampled_from([1, 2, 3, 2**31 + 1]))
def test_kv_cache_exact_for_huge_sizes(impl, heads, head_dim, layers, bytes_per_value):
    """Exact integers for any positive sizes: a float step (h_kv / 2, or d · 2.0) rounds beyond 2**53."""
    want = layers * 2 * heads * head_dim * bytes_per_value
    for variant in acc.VARIANTS:
        got = impl.kv_cache_bytes_per_token(variant, layers, heads, head_dim, heads, bytes_per_value)
        assert got == want, (f"{cache_of(variant, layers, heads, head_dim, heads, bytes_per_value)}: "
                             f"{counted(got, want)}; count in integers, not floats")


# ------------------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize("kwargs, message", [
    (dict(hidden=0, heads=32, head_dim=128, layers=32), "hidden must be > 0"),
    (dict(hidden=4096, heads=32, head_dim=128, layers=-1), "layers must be > 0"),
    (dict(hidden=4096, heads=32.0, head_dim=128, layers=32), "heads must be an integer"),
    (dict(hidden=4096, heads=3, head_dim=128, layers=32), "heads must divide hidden"),
    (dict(hidden=4096, heads=32, head_dim=64, layers=32), "heads × head_dim must equal hidden"),
    (dict(hidden=4096, heads=32, head_dim=128, layers=32, kv_heads=5), "kv_heads must divide heads"),
    (dict(hidden=3968, heads=31, head_dim=128, layers=32), "DIFF V1 needs an even number of heads"),
    (dict(hidden=4096, heads=32, head_dim=128, layers=32, kv_heads=1), "DIFF V1 needs an even kv_heads"),
    (dict(hidden=4096, heads=32, head_dim=128, layers=32, ffn=0), "ffn must be > 0"),
    (dict(hidden=4096, heads=32, head_dim=128, layers=32, vocab=0), "vocab must be > 0"),
])
def test_model_config_names_the_violated_constraint(kwargs, message):
    with pytest.raises(ConfigError) as info:
        acc.ModelConfig(**kwargs)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


@PROPERTY
@given(layouts())
def test_accepted_layouts_keep_v2_pairs_in_one_kv_group(layout):
    """check_layout's claim: h_kv | h is all V2 needs for query heads 2i, 2i+1 to share a KV head."""
    hidden, heads, d, kv = layout
    acc.ModelConfig(hidden=hidden, heads=heads, head_dim=d, layers=1, kv_heads=kv)
    group = 2 * heads // kv  # flash-attn maps query head q to KV head q // group
    assert all((2 * i) // group == (2 * i + 1) // group for i in range(heads))


def test_kernel_and_table_options_are_validated():
    with pytest.raises(ConfigError, match="v1_kernel must be one of"):
        acc.kernel_calls("diff_v1", 32, 128, v1_kernel="three_call")
    config = acc.ModelConfig(hidden=4096, heads=32, head_dim=128, layers=32)
    for kwargs in (dict(context=0), dict(bytes_per_value=0)):
        with pytest.raises(ConfigError, match="must be > 0"):
            acc.accounting_table(config, **kwargs)


# ------------------------------------------------------------------------------------------------ whole model


def test_llama_7b_shape_counts_6_738_415_616():
    """LLaMA-7B's published size ("6.7B", arXiv:2302.13971 Table 2): 32 × 202,383,360 + 2 × 32000 × 4096 + 4096."""
    assert acc.swiglu_width(4096) == 11008 and acc.swiglu_width(3072) == 8192
    config = acc.ModelConfig(hidden=4096, heads=32, head_dim=128, layers=32, vocab=32000)
    assert config.ffn == 11008 and config.kv_heads == 32
    assert acc.model_params(config, "baseline")["total"] == 6_738_415_616
    # every weight a token is multiplied by: all of it except the embedding lookup and the 2·32 + 1 RMSNorm weights
    assert acc.matmul_params(config, "baseline") == 6_738_415_616 - 32000 * 4096 - (2 * 32 + 1) * 4096


def test_diff_3b_config_does_not_reproduce_the_papers_2_8b():
    """Paper App. D, Table 9 (as transcribed): a straightforward count of the Table 9 shape is ≈3.17B before
    embeddings, not ≈2.8B."""
    counts = lesson.run()["diff3b"]["diff_v1"]
    assert counts["non_embedding"] == 3_171_090_432
    assert all(abs(n - 2.8e9) / 2.8e9 > 0.10 for n in counts.values())


@PROPERTY
@given(layouts(), st.integers(1, 4), st.integers(1, 1000))
def test_matmul_weights_grow_only_in_v2_and_the_2h_model(layout, layers, vocab):
    hidden, heads, d, kv = layout
    config = acc.ModelConfig(hidden=hidden, heads=heads, head_dim=d, layers=layers, kv_heads=kv, vocab=vocab)
    base = acc.matmul_params(config, "baseline")
    assert acc.matmul_params(config, "diff_v1") == base  # λ vectors and subln never multiply a token
    assert acc.matmul_params(config, "diff_v2") - base == layers * (hidden * hidden + hidden * heads)
    assert acc.matmul_params(config, "baseline_2h") - base == layers * 2 * hidden * hidden


# ------------------------------------------------------------------------------------------------ FLOPs and decode


@PROPERTY
@given(layouts(), st.integers(1, 1 << 17))
def test_attention_core_flop_ratios(layout, context):
    """V1 2-call 1.5×, V1 4-call 2×, V2 2× the baseline's attention-core FLOPs (any context)."""
    _, heads, d, kv = layout
    base = acc.attention_flops_per_token("baseline", heads, d, context, kv)
    assert base == heads * context * 2 * d  # h maps × 2 FLOPs × context/2 keys × (d + d)
    assert 2 * acc.attention_flops_per_token("diff_v1", heads, d, context, kv, "two_call") == 3 * base
    assert acc.attention_flops_per_token("diff_v1", heads, d, context, kv, "four_call") == 2 * base
    assert acc.attention_flops_per_token("diff_v2", heads, d, context, kv) == 2 * base


@PROPERTY
@given(layouts(), st.sampled_from([1, 2, 4]))
def test_decode_intensity_and_bytes_read(layout, bytes_per_value):
    """Baseline h/h_kv FLOP per bf16 byte; V2 doubles it on the same reads; V1 reads 1.5× or 2×."""
    _, heads, d, kv = layout
    cache = acc.kv_cache_bytes_per_token("baseline", 1, heads, d, kv, bytes_per_value)
    intensity = {}
    for row, (variant, kernel) in acc.KERNEL_ROWS.items():
        intensity[row] = acc.decode_flops_per_byte(variant, heads, d, kv, bytes_per_value, kernel)
    assert intensity["baseline"] == pytest.approx(2 * heads / kv / bytes_per_value, rel=1e-12)
    assert intensity["diff_v2"] == pytest.approx(2 * intensity["baseline"], rel=1e-12)
    assert intensity["diff_v1_2call"] == pytest.approx(intensity["baseline"], rel=1e-12)
    assert acc.decode_kv_read_bytes("diff_v2", heads, d, kv, bytes_per_value) == cache
    assert 2 * acc.decode_kv_read_bytes("diff_v1", heads, d, kv, bytes_per_value, "two_call") == 3 * cache
    assert acc.decode_kv_read_bytes("diff_v1", heads, d, kv, bytes_per_value, "four_call") == 2 * cache


# ------------------------------------------------------------------------------------------------ table and lesson


def test_table_agrees_with_the_functions_and_is_json():
    config = acc.ModelConfig(hidden=4096, heads=32, head_dim=128, layers=32, kv_heads=8, vocab=32000)
    table = acc.accounting_table(config, context=8192)
    assert json.loads(json.dumps(table)) == table
    for variant in acc.VARIANTS:
        assert table["params"][variant]["attention"] == acc.attention_params(variant, 4096, 32, 128, 8)
        cache = acc.kv_cache_bytes_per_token(variant, 32, 32, 128, 8)
        assert table["kv_cache"][variant]["bytes_at_context"] == 8192 * cache
    assert table["params"]["diff_v2"]["attention"] - table["params"]["baseline"]["attention"] == 4096**2 + 4096 * 32
    text = acc.format_table(table)
    assert "58,851,328" in text and "+16,908,288" in text and "128.0 KiB" in text and "1.50×" in text


def test_the_public_scripts_8_4m_is_rebuilt_and_the_truth_is_16_9m():
    seed = lesson.run()["seed002"]
    assert seed["v2_extra"] == 8_404_992 and f"{seed['v2_extra'] / 1e6:.1f}M" == "8.4M"
    assert seed["official_v2_extra_vs_gqa8"] == 16_908_288 == 4096**2 + 4096 * 32
    assert seed["official_v1_extra"] == 6 * 128
    assert seed["v1_cache_if_value_halved_vs_true"] == 0.75


def test_v2_saving_vs_2h_approaches_25_percent_only_for_few_kv_heads():
    saving = lesson.run()["v2_saving_vs_2h"]
    assert saving["8"] == pytest.approx(0.2205, abs=5e-4)  # 22.0%: V2 saves a bit over a fifth of the 2h module
    values = [saving[str(kv)] for kv in lesson.SWEEP_KV]
    assert values == sorted(values, reverse=True) and all(v < 0.25 for v in values)


def test_report_is_built_from_results_alone():
    results = lesson.run()
    assert lesson.report(json.loads(json.dumps(results))) == lesson.report(results)


@PROPERTY
@given(layouts(), st.integers(1, 4), st.integers(1, 1 << 17))
def test_decode_step_bytes_add_weights_and_kv_reads(layout, layers, context):
    """Batch-1 decode: V2 pays only its extra weights (D² + D·h per layer); V1 2-call pays half the cache again."""
    hidden, heads, d, kv = layout
    config = acc.ModelConfig(hidden=hidden, heads=heads, head_dim=d, layers=layers, kv_heads=kv)
    base = acc.decode_step_bytes(config, "baseline", context)
    cache = context * acc.kv_cache_bytes_per_token("baseline", layers, heads, d, kv)
    assert base == 2 * acc.matmul_params(config, "baseline") + cache
    assert acc.decode_step_bytes(config, "diff_v2", context) - base == 2 * layers * (hidden * hidden + hidden * heads)
    assert 2 * (acc.decode_step_bytes(config, "diff_v1", context, 2, "two_call") - base) == cache
