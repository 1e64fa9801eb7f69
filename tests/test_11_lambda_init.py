"""Lesson 11: the λ_init ablation (the paper's Table 6): DIFF V1 with a constant λ_init, the paired runs of
`diffattn compare --lambda-init`, and the committed results lessons 09-11 read back (diffattn.eval.saved).

Training runs are the cpu-tiny model for 2 steps of tiny batches, in a temporary DIFFATTN_ROOT (seconds).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from diffattn import cli, config
from diffattn.training import ablation
from diffattn.training import checkpoint  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.eval import saved  # noqa: E402
from diffattn.model.gpt import GPT, GPTConfig  # noqa: E402
from diffattn.pure.attention import lambda_init as scheduled  # noqa: E402
from diffattn.config import matched  # noqa: E402

pytestmark = pytest.mark.torch
SMALL = dict(n_layer=3, d_model=32, n_head=4, max_seq_len=16, attention="diff_v1")


def layers(model: GPT) -> list:
    return [block.attn for block in model.blocks]


def test_a_constant_lambda_init_replaces_the_schedule_in_every_layer_and_nothing_else():
    torch.manual_seed(0)
    schedule = GPT(GPTConfig(**SMALL))
    torch.manual_seed(0)
    constant = GPT(GPTConfig(**SMALL, lambda_init=0.5))
    assert [a.lambda_init for a in layers(schedule)] == [scheduled(d) for d in range(3)]
    assert [a.lambda_init for a in layers(constant)] == [0.5, 0.5, 0.5]
    # The ablation's runs are paired: λ_init draws no random numbers, so one seed gives one set of initial weights.
    a, b = schedule.state_dict(), constant.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init: only the constant term moved, by 0.5 − λ_init(depth).
    for depth, (s, c) in enumerate(zip(layers(schedule), layers(constant))):
        assert float((c.lambda_full() - s.lambda_full()).detach()) == pytest.approx(0.5 - scheduled(depth), abs=1e-6)


def test_the_head_scale_is_one_minus_the_constant():
    from diffattn.nn.rope import rope_cos_sin

    torch.manual_seed(1)
    attn = layers(GPT(GPTConfig(**SMALL, lambda_init=0.8)))[2]
    x = torch.randn(1, 8, 32)
    rope = rope_cos_sin((0, 8), attn.head_dim)
    heads = attn.differential_heads(x, rope)  # (1, 8, h, 2d)
    rms = heads * torch.rsqrt(heads.pow(2).mean(-1, keepdim=True) + attn.subln.eps) * attn.subln.weight
    assert torch.allclose(attn(x, rope), attn.out_proj((rms * (1 - 0.8)).flatten(2)), atol=1e-6)


@pytest.mark.parametrize("attention, value", [("baseline", 0.5), ("diff_v2", 0.5), ("diff_v1", 0.0),
                                              ("diff_v1", 1.0), ("diff_v1", -0.2), ("diff_v1", float("nan"))])
def test_lambda_init_is_refused_where_it_means_nothing(attention, value):
    with pytest.raises(ConfigError, match="lambda_init"):
        GPTConfig(**{**SMALL, "attention": attention}, lambda_init=value)


@pytest.mark.parametrize("text, expected", [("schedule,0.8,0.5", [None, 0.8, 0.5]), (" 0.5 ", [0.5]),
                                            ("0.3,schedule", [0.3, None])])
def test_settings_parse(text, expected):
    assert ablation.parse_settings(text) == expected


@pytest.mark.parametrize("text, message", [("0.8,abc", "'abc'"), ("1.5", "(0, 1)"), ("0", "(0, 1)"), (",", "at least"),
                                           ("0.5,0.5", "twice"), ("schedule,schedule", "twice")])
def test_bad_settings_are_one_line_errors(text, message, capsys):
    assert cli.main(["compare", "--preset", "cpu-tiny", "--lambda-init", text]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err


@pytest.fixture
def tiny_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DIFFATTN_ROOT", str(tmp_path))
    monkeypatch.setitem(config.PRESETS, "cpu-tiny", config.Preset(
        config.PRESETS["cpu-tiny"].model,
        config.TrainConfig(steps=2, batch_size=4, seq_len=32, eval_every=1, eval_sequences=4, checkpoint_every=2),
        "test"))
    return tmp_path


def test_the_ablation_pairs_runs_by_seed_and_records_each_setting(tiny_root):
    results = ablation.ablate(matched("cpu-tiny"), seeds=(0, 1), settings=[None, 0.5], progress=False)
    schedule, constant = results["settings"]["schedule"], results["settings"]["constant 0.5"]
    assert results["reference"] == "schedule" and list(results["settings"]) == ["schedule", "constant 0.5"]
    assert schedule["lambda_init"] == [scheduled(0), scheduled(1)] and constant["lambda_init"] == [0.5, 0.5]
    gaps = constant["paired_difference"]
    assert gaps["per_seed"] == [c["val_loss"] - s["val_loss"] for c, s in zip(constant["runs"], schedule["runs"])]
    assert gaps["min"] <= gaps["mean"] <= gaps["max"] and "paired_difference" not in schedule
    # A constant has its own folders; the schedule is lesson 08's own DIFF V1 run (the same config, one folder).
    root = tiny_root / "outputs" / "checkpoints" / "cpu-tiny" / "text"
    model, config = checkpoint.load_model(root / "diff_v1-lambda_init0.5-seed1")
    assert config["model"]["lambda_init"] == 0.5 and [a.lambda_init for a in layers(model)] == [0.5, 0.5]
    model, config = checkpoint.load_model(root / "diff_v1")
    assert config["model"]["lambda_init"] is None and layers(model)[1].lambda_init == scheduled(1)
    assert ablation.run_name(None) == compare_variant_folder()
    # The batches are paired too: equal training configs, and the data generator ends in the same state.
    a, b = (checkpoint.load_checkpoint(root / name) for name in ("diff_v1", "diff_v1-lambda_init0.5"))
    assert a["config"]["train"] == b["config"]["train"] and torch.equal(a["rng"]["data"], b["rng"]["data"])
    # The learned λ is reported per layer, mean over seeds, from the runs' last evaluation.
    assert constant["final_lambda"] == pytest.approx(
        [sum(r["lambda"][-1][i] for r in constant["runs"]) / 2 for i in range(2)])
    table = ablation.format_table(results)
    assert "constant 0.5" in table and f"{gaps['mean']:+.3f}" in table


def compare_variant_folder() -> str:
    from diffattn.config import default_out

    return default_out("cpu-tiny", "text", "diff_v1").name


def test_reuse_keeps_finished_runs_and_retrains_nothing(tiny_root):
    first = ablation.ablate(matched("cpu-tiny"), seeds=(0,), settings=[None, 0.5], progress=False)
    root = tiny_root / "outputs" / "checkpoints" / "cpu-tiny" / "text"
    stamps = {p.name: (p / "metrics.jsonl").stat().st_mtime_ns for p in root.iterdir()}
    again = ablation.ablate(matched("cpu-tiny"), seeds=(0,), settings=[None, 0.5], progress=False, reuse=True)
    assert {p.name: (p / "metrics.jsonl").stat().st_mtime_ns for p in root.iterdir()} == stamps
    assert again["settings"]["constant 0.5"]["paired_difference"]["per_seed"] == first["settings"]["constant 0.5"][
        "paired_difference"]["per_seed"]
    assert again["wall_is_sum_of_runs"] and again["wall_s"] == pytest.approx(
        sum(r["wall_s"] for s in again["settings"].values() for r in s["runs"]))


def test_committed_results_are_read_back_or_absent(tiny_root):
    assert saved.suites() == {} and saved.lambda_init() == {}
    root = tiny_root / "outputs" / "eval" / "cpu-small"
    (root / "diff_v1").mkdir(parents=True)
    summary = {"seeds": 2, "variants": {"diff_v1": {"runs": []}},
               "machine": {"cpu": "x", "torch_threads": 1, "torch": "t", "date": "d", "note": "shared"}}
    (root / "summary.json").write_text(json.dumps(summary))
    (root / "diff_v1" / "retrieval.json").write_text(json.dumps({"overall": 1}))
    (root / "diff_v1" / "seed1").mkdir()
    (root / "diff_v1" / "seed1" / "retrieval.json").write_text(json.dumps({"overall": 2}))
    assert saved.suites() == {"cpu-small": {"summary": summary, "variants": {"diff_v1": {"retrieval": {"overall": 1}}},
                                            "seeds": {"diff_v1": [{"overall": 2}]}}}
    assert saved.machine_line(summary["machine"]) == "x, 1 thread(s), torch t, d; shared"
