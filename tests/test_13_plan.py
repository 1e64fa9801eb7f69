"""Lesson 13: `diffattn plan` (diffattn.plan): real configs read right, bad ones refused in one line, the
plan's numbers equal lesson 04's accounting and lesson 12's roofline for the same shapes, every rule cites evidence,
and the whole command runs with every third-party module blocked (tests/test_13_plan_cli.py)."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from diffattn import cli
from diffattn.core.errors import ConfigError
from diffattn.plan import evidence, figures, hfconfig, rules
from diffattn.plan.assemble import make_plan
from diffattn.plan.hfconfig import FULL, SLIDING
from diffattn.pure import accounting, roofline

ROOT = Path(__file__).resolve().parents[1]
LLAMA = dict(model_type="llama", hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
             intermediate_size=14336, num_hidden_layers=32, max_position_embeddings=8192)


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def plan_args(source: list[str], context: int = 4096) -> list[str]:
    return ["plan", *source, "--context", str(context), "--hallucination", "high", "--budget-tokens", "1T",
            "--mode", "pretrain"]


# ------------------------------------------------------------------------------------------------ reading configs


# name: (hidden, heads, kv, head_dim, ffn, layers, max positions, vocab, tied, full layers, window)
SHIPPED = {
    "llama-3.1-8b": (4096, 32, 8, 128, 14336, 32, 131072, 128256, False, 32, None),
    "llama-3.2-1b": (2048, 32, 8, 64, 8192, 16, 131072, 128256, True, 16, None),
    "qwen3-4b": (2560, 32, 8, 128, 9728, 36, 40960, 151936, True, 36, None),
    "qwen3-8b": (4096, 32, 8, 128, 12288, 36, 40960, 151936, False, 36, None),
    "gemma-3-12b": (3840, 16, 8, 256, 15360, 48, 131072, 262208, True, 8, 1024),
}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_read_as_their_public_numbers(name):
    a = hfconfig.from_preset(name)
    got = (a.hidden, a.heads, a.kv_heads, a.head_dim, a.ffn, a.layers, a.max_positions, a.vocab, a.tied_embeddings,
           a.layer_types.count(FULL), a.window)
    assert got == SHIPPED[name]
    assert "_source" in json.loads((hfconfig.EXAMPLES_DIR / f"{name}.json").read_text()), "each file cites its source"


def test_explicit_head_dim_wins_over_hidden_over_heads():
    qwen = hfconfig.from_preset("qwen3-4b")
    assert qwen.query_width == 4096 != qwen.hidden == 2560
    llama = hfconfig.from_preset("llama-3.1-8b")  # no head_dim in the file: 4096 / 32, and the plan says so
    assert llama.head_dim == 128 and any("head_dim is absent" in n for n in llama.notes)


def test_gemma3_nested_text_config_slides_five_layers_in_six():
    g = hfconfig.from_preset("gemma-3-12b")
    assert g.model_type == "gemma3_text"
    assert [i for i, kind in enumerate(g.layer_types) if kind == FULL] == [5, 11, 17, 23, 29, 35, 41, 47]
    assert g.rope == {"theta": 1000000.0, "scaling": {"factor": 8.0, "rope_type": "linear"}}
    assert g.cached_tokens(131072) == 8 * 131072 + 40 * 1024
    assert g.cached_tokens(512) == 48 * 512  # inside the window every layer holds the whole context


def test_transformers5_layout_reads_like_the_older_one():
    """transformers ≥ 5 writes layer_types and rope_parameters keyed by layer type instead of the pattern and the
    rope_theta / rope_scaling / rope_local_base_freq trio."""
    old = json.loads((hfconfig.EXAMPLES_DIR / "gemma-3-12b.json").read_text())["text_config"]
    new = {k: v for k, v in old.items() if k not in ("sliding_window_pattern", "rope_theta", "rope_scaling",
                                                    "rope_local_base_freq")}
    new["layer_types"] = [FULL if (i + 1) % 6 == 0 else SLIDING for i in range(48)]
    new["rope_parameters"] = {FULL: {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                              SLIDING: {"rope_type": "default", "rope_theta": 10000.0}}
    a, b = hfconfig.from_dict({"text_config": old}, "old"), hfconfig.from_dict({"text_config": new}, "new")
    assert replace(a, source="x") == replace(b, source="x")
    flat = hfconfig.from_dict({**LLAMA, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}, "flat")
    assert flat.rope == {"theta": 5e5, "scaling": None}


def test_each_family_slides_the_layers_its_own_code_slides():
    """The rules of diffattn.plan.families (tests/test_13_plan_configs.py runs them on real configs)."""
    def kinds(**fields):
        return hfconfig.from_dict({**LLAMA, **fields}, "config.json").layer_types

    assert kinds(model_type="mistral", sliding_window=4096) == (SLIDING,) * 32
    assert kinds(model_type="llama", sliding_window=4096) == (FULL,) * 32  # Llama has no sliding window
    assert kinds(model_type="qwen2", sliding_window=4096) == (FULL,) * 32  # use_sliding_window defaults to false
    assert kinds(model_type="qwen2", sliding_window=4096, use_sliding_window=True, max_window_layers=20) == \
           (FULL,) * 20 + (SLIDING,) * 12
    assert kinds(model_type="gemma2", sliding_window=4096) == (SLIDING, FULL) * 16
    assert kinds(model_type="something_new", sliding_window=4096) == (SLIDING,) * 32
    assert any("assumed to slide" in n for n in hfconfig.from_dict(
        {**LLAMA, "model_type": "something_new", "sliding_window": 4096}, "c").notes)


BAD_CONFIGS = [
    ({"hidden_size": 4100}, "head_dim is absent and hidden_size 4100 is not a multiple of num_attention_heads 32"),
    ({"num_key_value_heads": 5}, "num_key_value_heads 5 does not divide num_attention_heads 32"),
    ({"intermediate_size": None}, "lacks intermediate_size"),
    ({"model_type": "gpt2", "hidden_size": None, "num_attention_heads": None, "n_embd": 768},
     "(model_type 'gpt2') lacks hidden_size, num_attention_heads"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
    ({"num_attention_heads": 32.0}, "num_attention_heads must be a positive integer"),
    ({"head_dim": True}, "head_dim must be a positive integer"),
    ({"layer_types": [FULL] * 31}, "layer_types must list one type per layer (32)"),
    ({"layer_types": ["chunked_attention"] * 32}, "layer_types has chunked_attention"),
    ({"layer_types": [SLIDING] * 32}, "has sliding_attention layers but no sliding_window"),
    ({"rope_scaling": "yarn"}, "rope_scaling must be an object or null"),
]


@pytest.mark.parametrize("change, message", BAD_CONFIGS, ids=[m[:40] for _, m in BAD_CONFIGS])
def test_inconsistent_configs_are_refused_naming_the_field(change, message):
    raw = {k: v for k, v in {**LLAMA, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as info:
        hfconfig.from_dict(raw, "config.json")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_context_past_max_positions_needs_rope_scaling():
    plain = hfconfig.from_dict(LLAMA, "config.json")
    plain.check_context(8192)
    with pytest.raises(ConfigError, match="exceeds max_position_embeddings 8,192 .* declares no rope scaling"):
        plain.check_context(8193)
    scaled = hfconfig.from_dict({**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "config.json")
    scaled.check_context(32768)  # allowed, and the plan flags the extrapolation as a hypothesis:
    plan = make_plan(scaled, 32768, "high", 10**12, "pretrain", measured={})
    assert any(r["hypothesis"] and "past max_position_embeddings" in r["text"] for r in plan["caveats"])
    default = hfconfig.from_dict({**LLAMA, "rope_scaling": {"rope_type": "default"}}, "config.json")
    with pytest.raises(ConfigError):  # a 'default' scaling block scales nothing
        default.check_context(8193)


# ------------------------------------------------------------------------------------------------ the command


def _one_line_error(code: int, out: str, err: str, fragment: str) -> None:
    assert code == 2 and out == "", (code, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and fragment in err, err


@pytest.mark.parametrize("content, fragment", [
    (None, "cannot read"),  # no file
    ("{bad", "is not valid JSON"),
    ("[1, 2]", "is not a JSON object"),
    (b"\xff\xfe{}", "cannot read"),
    (json.dumps({**LLAMA, "num_key_value_heads": 3}), "does not divide"),
    (json.dumps(LLAMA), "exceeds max_position_embeddings"),  # context 16384 > 8192, no scaling
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, content, fragment):
    config, out = tmp_path / "config.json", tmp_path / "plan.md"
    if isinstance(content, str):
        config.write_text(content)
    elif content is not None:
        config.write_bytes(content)
    _one_line_error(*run_cli(*plan_args(["--config", str(config)], 16384), "--out", str(out)), fragment)
    assert not out.exists()


@pytest.mark.parametrize("args, fragment", [
    (["plan", "--preset", "qwen3-4b", "--context", "4096"], "plan needs --hallucination, --budget-tokens, --mode"),
    (plan_args(["--preset", "nope"]), "--preset must be one of"),
    (plan_args(["--preset", "qwen3-4b"])[:-4] + ["--budget-tokens", "1.5", "--mode", "pretrain"], "whole number"),
    (plan_args(["--preset", "qwen3-4b"])[:-4] + ["--budget-tokens", "lots", "--mode", "pretrain"], "number of tokens"),
    (plan_args(["--preset", "qwen3-4b"], 0), "--context must be a positive integer"),
    (plan_args(["--preset", "qwen3-4b"]) + ["--bandwidth-tbs", "0"], "--bandwidth-tbs must be a positive number"),
    (plan_args(["--preset", "qwen3-4b"]) + ["--config", "x.json"], "not allowed with argument"),
])
def test_bad_arguments_are_one_line_exit_2(args, fragment):
    _one_line_error(*run_cli(*args), fragment)


def test_token_counts_take_suffixes():
    from diffattn.cli.plan_command import token_count

    assert [token_count(t) for t in ("2000000000", "2e9", "2B", "2_000M", "0.5T", "1,000")] == \
           [2 * 10**9] * 4 + [5 * 10**11, 1000]


def test_json_and_markdown_carry_the_same_plan(tmp_path):
    code, text, _ = run_cli(*plan_args(["--preset", "llama-3.2-1b"]), "--json", "--out", str(tmp_path / "p.json"))
    assert code == 0 and json.loads((tmp_path / "p.json").read_text()) == json.loads(text)
    plan = json.loads(text)
    code, markdown, _ = run_cli(*plan_args(["--preset", "llama-3.2-1b"]))
    titles = [line[3:] for line in markdown.splitlines() if line.startswith("## ")]
    from diffattn.plan.markdown import SECTIONS

    assert titles == [title for _, title in SECTIONS]
    for key in ("why", "not_adopting", "risks", "rollback", "lambda", "throughput"):
        for rule in plan[key]:
            assert rule["text"] in markdown


# ------------------------------------------------------------------------------------------------ the numbers


# the accounting CLI's FLOP and decode row of each variant: V1 on the planner's kernel path (figures.V1_KERNEL)
KERNEL_ROW = {"baseline": "baseline", "baseline_2h": "baseline_2h", "diff_v1": "diff_v1_2call", "diff_v2": "diff_v2"}


def test_the_llama_8b_figures_equal_the_accounting_command():
    """The planner's worked figure: the Llama-style 8B GQA(8) V2 delta is +16,908,288 attention weights per layer, and every
    shared number equals `diffattn accounting --json` for the same shape."""
    arch = hfconfig.from_preset("llama-3.1-8b")
    context = 32768
    code, text, _ = run_cli("accounting", "--hidden", "4096", "--heads", "32", "--head-dim", "128", "--layers", "32",
                            "--kv-heads", "8", "--ffn", "14336", "--vocab", "128256", "--context", str(context), "--json")
    table = json.loads(text)
    layers, decode = figures.layer_table(arch, context), figures.decode_table(arch, context)
    assert layers["variants"]["diff_v2"]["delta"]["baseline"]["attention_params_per_layer"] == 16_908_288
    for variant, row in layers["variants"].items():
        assert row["attention_per_layer"] == table["params"][variant]["attention"]
        assert row["model_params"] == table["params"][variant]["model"]
        assert row["kv_bytes_at_context"] == table["kv_cache"][variant]["bytes_at_context"]
    for variant, row in KERNEL_ROW.items():
        assert layers["variants"][variant]["forward_flops_per_token"]["total"] == table["flops_per_token"][row]["total"]
        assert decode["variants"][variant]["bytes"] == table["decode"][row]["step_bytes"]


def test_a_query_width_apart_from_hidden_is_counted_from_the_formulas():
    """Qwen3-4B, D = 2560, h = 32, d = 128, h_kv = 8: the weights written out here, not taken from the library."""
    D, h, d, kv = 2560, 32, 128, 8
    rows = figures.layer_table(hfconfig.from_preset("qwen3-4b"), 4096)["variants"]
    assert rows["baseline"]["attention_per_layer"] == D * h * d + 2 * D * kv * d + h * d * D
    assert rows["diff_v2"]["attention_per_layer"] == 2 * D * h * d + 2 * D * kv * d + h * d * D + D * h
    assert rows["baseline_2h"]["attention_per_layer"] == 2 * D * h * d + 2 * D * kv * d + 2 * h * d * D
    assert rows["diff_v2"]["shapes"] == {"q_proj": "2560 → 8192", "k_proj": "2560 → 1024", "v_proj": "2560 → 1024",
                                         "o_proj": "4096 → 2560", "lambda_proj": "2560 → 32"}
    assert not rows["diff_v1"]["applicable"] and "heads × head_dim must equal hidden" in rows["diff_v1"]["why_not"]
    with pytest.raises(ConfigError):  # lesson 04's own models still tie h·d to hidden
        accounting.ModelConfig(hidden=D, heads=h, head_dim=d, layers=36, kv_heads=kv)


def test_mqa_models_get_v2_but_not_v1():
    arch = hfconfig.from_dict({**LLAMA, "num_key_value_heads": 1}, "mqa")
    reasons = figures.applicable(arch)
    assert reasons["diff_v2"] is None and "even kv_heads" in reasons["diff_v1"]


def test_sliding_layers_cut_cache_and_attention_by_their_window():
    g = hfconfig.from_preset("gemma-3-12b")
    S, W = 131072, 1024
    per_layer_token = 2 * g.kv_heads * g.head_dim * 2  # K and V, bf16
    assert figures.layer_table(g, S)["variants"]["baseline"]["kv_bytes_at_context"] == per_layer_token * (8 * S + 40 * W)
    # keys per query, doubled (lesson 04's convention: a full layer's mean is S/2): sliding layers by brute force
    brute = 2 * sum(min(t, W) for t in range(1, S + 1)) / S
    assert figures.attended_keys(g, S) == pytest.approx(8 * S + 40 * brute, rel=1e-4)
    full = replace(g, layer_types=(FULL,) * 48, window=None)
    assert figures.attended_keys(full, S) == 48 * S
    assert figures.decode_table(g, S)["mean_cached_tokens"] == -(-(8 * S + 40 * W) // 48)


def test_decode_figures_are_the_roofline_of_the_same_model():
    arch, machine = hfconfig.from_preset("llama-3.2-1b"), {"name": "m", "peak_flops": 1e14, "bandwidth": 1e12}
    table = figures.decode_table(arch, 256, machine)
    config = hfconfig.model_config(arch)
    for variant, row in table["variants"].items():
        step = roofline.decode_step(config, variant, 256, 1, 2, figures.V1_KERNEL)
        assert row["seconds"] == max(step.flops / 1e14, step.bytes / 1e12)
        assert row["crossover_batch"] == roofline.crossover_batch(config, variant, 256, 1e14, 1e12, 2, figures.V1_KERNEL)


def test_v1_lambda_init_is_listed_by_zero_based_depth_and_only_for_v1():
    plan = make_plan(hfconfig.from_preset("llama-3.2-1b"), 4096, "high", 10**12, "pretrain", measured={})
    schedule = plan["layers"]["variants"]["diff_v1"]["lambda_init"]
    assert len(schedule) == 16 and schedule[0] == pytest.approx(0.2) and schedule[-1] == pytest.approx(0.8 - 0.6 * 2.718281828459045 ** -4.5)
    v2, v1 = plan["lambda"]
    assert "σ(W_λ x_t)" in v2["text"] and "λ_init" not in v2["text"].split("no λ_init")[0]
    assert v1["text"].startswith("V1 only") and "0.2000 at layer 0" in v1["text"]


# ------------------------------------------------------------------------------------------------ the rules


@pytest.mark.parametrize("mode", rules.MODES)
@pytest.mark.parametrize("profile", rules.PROFILES)
def test_every_rule_cites_known_evidence_and_the_verdict_follows_the_procedure(mode, profile):
    plan = make_plan(hfconfig.from_preset("qwen3-8b"), 32768, profile, 10**12, mode, measured={})
    expected = {"pretrain": "optional" if profile == "low" else "adopt"}.get(mode, "experiment")
    assert plan["recommendation"] == {"verdict": expected, "variant": "diff_v2"}
    cited = {key for name in ("why", "not_adopting", "caveats", "lambda", "throughput", "risks", "rollback")
             for rule in plan[name] for key in rule["evidence"]}
    assert cited - {evidence.HYPOTHESIS} == set(plan["evidence"]) and set(plan["evidence"]) <= set(evidence.EVIDENCE)
    for name in ("why", "not_adopting", "caveats", "lambda", "throughput", "risks", "rollback"):
        for rule in plan[name]:
            assert rule["evidence"], rule["text"]
            only_hypotheses = all(evidence.EVIDENCE[k].kind == evidence.HYPOTHESIS for k in rule["evidence"]
                                  if k != evidence.HYPOTHESIS)
            assert rule["hypothesis"] == (evidence.HYPOTHESIS in rule["evidence"] or only_hypotheses)


def test_caveats_mark_what_lies_outside_the_published_range():
    arch = hfconfig.from_preset("llama-3.1-8b")
    inside = make_plan(arch, 32768, "high", 10**12, "pretrain", measured={})
    assert inside["caveats"] == []
    outside = make_plan(arch, 131072, "high", 10**9, "pretrain", measured={})
    texts = [r["text"] for r in outside["caveats"]]
    assert any("below the paper's smallest matched comparison" in t for t in texts)
    assert any("past the 64K the paper evaluated" in t for t in texts)
    assert all(r["hypothesis"] for r in outside["caveats"])


def test_a_rule_citing_unknown_evidence_is_refused():
    from diffattn.plan.assemble import _rule

    with pytest.raises(ConfigError, match="unknown evidence"):
        _rule(rules.Rule("anything", ("no_such_source",)), evidence.EVIDENCE)


# ------------------------------------------------------------------------------------------------ measurements


def test_measured_loss_pairs_runs_by_seed(tmp_path):
    def runs(losses):
        return {"runs": [{"seed": s, "curve": {"val_loss": [9.0, loss]}} for s, loss in losses.items()]}

    summary = {"preset": "p", "task": "t", "seeds": [0, 1, 2], "tokens": 100,
               "variants": {"baseline": runs({0: 2.0, 1: 2.2}), "diff_v2": runs({0: 1.9, 1: 2.0, 2: 0.0})}}
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    gap = evidence.measured_loss(path)["gap"]["diff_v2"]
    assert gap["pairs"] == 2 and gap["mean"] == pytest.approx(-0.15) and gap["min"] == pytest.approx(-0.2)
    assert evidence.measured_loss(tmp_path / "absent.json") is None


def test_the_warm_start_study_becomes_a_risk_of_converting_only(tmp_path):
    found = evidence.measured_warmstart()  # the committed study (lesson 13)
    summary = json.loads((ROOT / "outputs" / "warmstart" / "summary.json").read_text())
    assert found["gap"]["lora"]["mean"] == summary["arms"]["lora"]["loss_minus_baseline"]["mean"]
    assert found["beats_null"] == any(s["minus_null"]["above"] for a in summary["arms"].values() for s in a["seeds"])
    assert evidence.measured_warmstart(tmp_path / "absent.json") is None
    (tmp_path / "broken.json").write_text(json.dumps({"design": {}}))
    assert evidence.measured_warmstart(tmp_path / "broken.json") is None
    arch = hfconfig.from_preset("qwen3-8b")
    for mode, expected in (("uptrain", True), ("finetune", True), ("pretrain", False)):
        plan = make_plan(arch, 32768, "high", 10**12, mode, measured={"warmstart": found})
        cites = any("measured_warmstart" in r["evidence"] for r in plan["risks"])
        assert cites == expected and ("measured_warmstart" in plan["evidence"]) == expected, mode


def test_a_measured_decode_benchmark_replaces_the_roofline_assumption(tmp_path):
    """The planner reads lesson 12's runs (<run>/roofline.json) and picks the quietest, whatever the folders' order,
    of those diffattn.core.hardware.reliability passes."""
    assert evidence.measured_decode(tmp_path) is None

    def run(folder, ratio, peak_load, cores=16, of_roofline=0.5):
        rows = [{"variant": v, "context": c, "batch": b, "ms": ms, "of_roofline": of_roofline} for v, c, b, ms in
                [("baseline", 1024, 1, 2.0), ("diff_v2", 1024, 1, 2.0 * ratio), ("baseline", 512, 1, 1.0),
                 ("diff_v2", 1024, 8, 9.0)]] + [{"variant": "diff_v1", "context": 1024, "batch": 1, "error": "oom"}]
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "roofline.json").write_text(json.dumps(
            {"decode": rows, "load_average": {"start": [peak_load / 2, 1, 1], "decode": [peak_load, 1, 1], "train": []},
             "machine": {"cpu": "AMD EPYC", "threads": 1, "cores": cores}}))

    (tmp_path / "a-unreadable").mkdir()
    (tmp_path / "a-unreadable" / "roofline.json").write_text(json.dumps({"decode": "not rows"}))
    run("b-loaded", 1.5, 9.0)
    run("c-quiet", 1.05, 1.5)
    run("d-louder", 1.2, 2.5)
    run("e-quieter-but-above-its-roofline", 0.5, 0.5, of_roofline=3.0)
    run("f-quieter-but-busy-cores", 0.5, 1.0, cores=1)
    found = evidence.measured_decode(tmp_path)
    assert found["file"].endswith("c-quiet/roofline.json") and found["peak_load"] == 1.5 and found["runs"] == 3
    assert found["unreliable"] == 2
    assert found["context"] == 1024 and found["ratio"] == {"diff_v2": pytest.approx(1.05)}
    plan = make_plan(hfconfig.from_preset("qwen3-4b"), 4096, "high", 10**12, "pretrain", measured={"decode": found})
    assert "measured_decode" in plan["throughput"][0]["evidence"] and "measured_decode" in plan["evidence"]
    assert "no measured decode" in make_plan(hfconfig.from_preset("qwen3-4b"), 4096, "high", 10**12, "pretrain",
                                             measured={})["throughput"][0]["text"]


# ------------------------------------------------------------------------------------------------ the evaluation plan


@pytest.mark.parametrize("preset", ["llama-3.1-8b", "qwen3-4b"])
def test_the_evaluation_plan_names_real_commands(preset):
    """Every command the plan lists parses with the course's own parser; the accounting line recomputes the rows
    where lesson 04 accepts the shape and is said to refuse it where it does not."""
    import shlex

    plan = make_plan(hfconfig.from_preset(preset), 4096, "high", 10**12, "pretrain", measured={})
    parser = cli.build_parser()
    for item in plan["evaluation"]:
        argv = shlex.split(item["command"])
        assert argv[0] == "diffattn"
        parser.parse_args(argv[1:])
    accounting_line = shlex.split(plan["evaluation"][0]["command"])[1:]
    code, _, err = run_cli(*accounting_line, "--json")
    assert (code == 0) == ("refuses" not in plan["evaluation"][0]["checks"]), err


def test_a_course_preset_plans_like_its_model():
    arch = hfconfig.from_preset("cpu-small")
    from diffattn.config import PRESETS

    m = PRESETS["cpu-small"].model
    assert (arch.hidden, arch.heads, arch.kv_heads, arch.head_dim, arch.layers, arch.ffn, arch.max_positions) == \
           (m.d_model, m.n_head, m.n_kv_head, m.head_dim, m.n_layer, m.ffn_hidden, m.max_seq_len)
    code, out, err = run_cli(*plan_args(["--preset", "cpu-small"], m.max_seq_len))
    assert code == 0 and "| DIFF V1 |" in out, err
    _one_line_error(*run_cli(*plan_args(["--preset", "cpu-small"], m.max_seq_len + 1)), "exceeds max_position_embeddings")
