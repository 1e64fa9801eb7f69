"""A variant is declared once (diffattn.pure.variants) and every consumer reads the declaration: a variant registered
here, in this file only, flows through the model, the accounting, a benchmark and the trainer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from diffattn.config import GPTConfig, accounting_model, build_configs, matched_configs  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.model.gpt import GPT  # noqa: E402
from diffattn.pure import accounting, variants  # noqa: E402
from diffattn.pure.variants import VariantSpec  # noqa: E402

CODE = Path(__file__).resolve().parents[1] / "code" / "diffattn"
# A baseline with twice the KV heads: the toy the recipe in CONTRIBUTING.md ("Add a variant") adds
TOY = VariantSpec("baseline_2kv", "2× KV heads", kind="baseline", kv_factor=2)


@pytest.fixture
def toy():
    with variants.registered(TOY) as spec:
        yield spec
    assert "baseline_2kv" not in variants.VARIANTS


def test_the_toy_builds_a_model_with_twice_the_kv_heads(toy):
    base = GPTConfig(n_layer=1, d_model=64, n_head=4, n_kv_head=2)
    config = matched_configs(base)["baseline_2kv"]
    assert (config.attention, config.n_head, config.n_kv_head) == ("baseline", 4, 4)
    model = GPT(config)
    assert model.blocks[0].attn.k_proj.weight.shape == (4 * 16, 64)
    assert model(torch.zeros(1, 8, dtype=torch.long)).shape == (1, 8, 256)
    assert accounting_model(config, "baseline_2kv") == accounting_model(base, "baseline")


def test_the_toy_is_counted_by_lesson_04s_accounting(toy):
    config = accounting.ModelConfig(hidden=64, heads=4, head_dim=16, layers=2, kv_heads=2)
    table = accounting.accounting_table(config, context=128)
    base, mine = table["params"]["baseline"], table["params"]["baseline_2kv"]
    assert mine["k_proj"] == mine["v_proj"] == 2 * base["k_proj"] and mine["q_proj"] == base["q_proj"]
    cache = table["kv_cache"]
    assert cache["baseline_2kv"]["bytes_per_token"] == 2 * cache["baseline"]["bytes_per_token"]
    assert "2× KV heads" in accounting.format_table(table)
    assert table["decode"]["baseline_2kv"]["kv_read_vs_cache"] == 1.0
    # the model's real parameter count is the accounting's
    model = GPT(matched_configs(GPTConfig(n_layer=1, d_model=64, n_head=4, n_kv_head=2))["baseline_2kv"])
    assert sum(p.numel() for p in model.blocks[0].attn.parameters()) == mine["attention"]


def test_the_toy_is_benchmarked_and_trained(toy, tmp_path):
    from diffattn.perf.decode import decode_points
    from diffattn.training.loop import train

    base = GPTConfig(n_layer=1, d_model=32, n_head=4, n_kv_head=2, max_seq_len=32)
    rows = decode_points(base, ("baseline", "baseline_2kv"), (1,), (8,), (1e9, 1e9), repeats=1)
    mine = next(r for r in rows if r["variant"] == "baseline_2kv")
    assert mine["ms"] > 0 and mine["v1_kernel"] is None
    model, c = build_configs("cpu-tiny", "baseline_2kv", steps=2, eval_every=2, checkpoint_every=2, warmup_steps=1,
                             batch_size=2, seq_len=16)
    assert model.n_kv_head == 2 * build_configs("cpu-tiny", "baseline")[0].n_kv_head
    last = train("cpu-tiny", model, c, tmp_path / "run", progress=False)
    assert last["step"] == 2 and last["val_loss"] > 0


def test_an_unknown_or_clashing_variant_is_one_clear_error():
    with pytest.raises(ConfigError, match="variant must be one of baseline, baseline_2h, diff_v1, diff_v2"):
        build_configs("cpu-tiny", "diff_v3")
    with pytest.raises(ConfigError, match="already registered"):
        variants.register(VariantSpec("baseline", "again", kind="baseline"))
    with pytest.raises(ConfigError, match="must be a registered kind"):
        variants.register(VariantSpec("v1_wide", "wide", kind="diff_v9"))
    with pytest.raises(ConfigError, match="a kind has a module"):
        VariantSpec("half_declared", "half", module="x:Y")


def test_the_kv_factor_must_divide_the_query_heads(toy):
    with pytest.raises(ConfigError, match="KV heads must divide the query heads"):
        accounting.attention_components("baseline_2kv", 96, 3, 32, 3)


# ----------------------------------------------------------------------- no variant's name is branched on elsewhere

NAMES = {"baseline", "baseline_2h", "diff_v1", "diff_v2"}


def _name_comparisons(path: Path) -> list[str]:
    """`x == "diff_v1"`, `"baseline" != y`, `x in ("baseline", "diff_v2")`: a branch on a variant's name."""
    found, where = [], path.relative_to(CODE) if path.is_relative_to(CODE) else path.name
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            if any(isinstance(i, ast.Constant) and i.value in NAMES for i in items):
                found.append(f"{where}:{node.lineno}")
    return found


# Modules whose subject is a named variant's own numbers, not how a variant behaves: the GPU report's targets (V2's
# decode ratio), lesson 12's rows and the planner's rules (which weigh V1's evidence against V2's). Listed, so that a
# new one is a decision
SINGLED_OUT = {"cli/gpu_run.py", "lessons/lesson12_roofline.py", "plan/rules.py"}


def test_only_the_registry_branches_on_a_variant_name():
    found = [hit for path in sorted(CODE.rglob("*.py")) if path.name != "variants.py"
             for hit in _name_comparisons(path) if hit.split(":")[0] not in SINGLED_OUT]
    assert not found, "branch on the registry's declarations instead (diffattn.pure.variants):\n" + "\n".join(found)


def test_the_comparison_finder_sees_each_form(tmp_path):
    sample = tmp_path / "probe.py"
    sample.write_text('a = x == "diff_v1"\nb = "baseline" != y\nc = z in ("baseline_2h", "q")\nd = x == "other"\n')
    assert [h.split(":")[1] for h in _name_comparisons(sample)] == ["1", "2", "3"]


def test_a_variant_that_does_not_fit_a_shape_is_left_out_of_its_tables(toy):
    """The toy needs twice the baseline's KV heads, which an MHA baseline (h_kv = h) cannot give: lesson 04's table
    and lesson 07's matched models leave it out there, and every other variant still builds."""
    assert not variants.fits("baseline_2kv", 32, 32) and variants.fits("baseline_2kv", 32, 8)
    table = accounting.accounting_table(accounting.ModelConfig(hidden=256, heads=4, head_dim=64, layers=1))
    assert "baseline_2kv" not in table["params"] and "2× KV heads" not in accounting.format_table(table)
    assert "baseline_2kv" not in matched_configs(GPTConfig(n_layer=1, d_model=64, n_head=4, n_kv_head=4))
    assert build_configs("gpu-small", "baseline", device="cpu")[0].n_head == 12  # 12 over 12 KV heads: no toy there


def test_each_variant_has_its_own_colour_and_kind_fields_stay_with_the_kind(toy):
    colours = [variants.colour(n) for n in variants.VARIANTS]
    assert len(set(colours)) == len(colours), colours
    with pytest.raises(ConfigError, match="are its kind's"):
        VariantSpec("v1_pairs", "V1 again", kind="diff_v1", lambda_kind="per_layer")
    assert variants.get("baseline_2h").base.lambda_kind == "" and variants.get("diff_v1").base.paired_heads


def test_the_eval_command_hands_every_option_to_the_library():
    """`diffattn eval` resolves its options once into EvalOptions: every field has an option of that name."""
    import dataclasses

    from diffattn.cli import build_parser
    from diffattn.cli.eval_command import options
    from diffattn.eval.kinds import EvalOptions

    args = build_parser().parse_args(["eval", "suite", "--preset", "cpu-tiny", "--samples", "3", "--bits", "8,4"])
    opts = options(args)
    assert isinstance(opts, EvalOptions) and (opts.preset, opts.samples, opts.bits) == ("cpu-tiny", 3, "8,4")
    assert {f.name for f in dataclasses.fields(EvalOptions)} <= set(vars(args))
