"""Lesson 08's CPU study: the initialisation knobs it varies, the plan it declares, and the whole pipeline (train what
is missing → summary.json with intervals and nulls) on a shrunken copy of its presets."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")

from diffattn import config  # noqa: E402
from diffattn.training import study_runs as study  # noqa: E402
from diffattn.training.ablation import run_name  # noqa: E402
from diffattn.config import INIT_STD, GPTConfig, build_configs, default_out  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.cli import study_command  # noqa: E402
from diffattn.eval.init_scale import branch_rms  # noqa: E402
from diffattn.model.gpt import GPT  # noqa: E402
from diffattn.nn.functional import lambda_init as schedule  # noqa: E402

pytestmark = pytest.mark.torch
V1 = GPTConfig(n_layer=3, d_model=32, n_head=4, n_kv_head=2, max_seq_len=32, attention="diff_v1")


def built(**changes) -> GPT:
    torch.manual_seed(0)
    return GPT(dataclasses.replace(V1, **changes))


def test_head_scale_separates_the_two_things_lambda_init_sets():
    paper, scaled, moved = built(), built(head_scale=0.2), built(lambda_init=0.8, head_scale="schedule")
    for depth, (a, b, c) in enumerate(zip(paper.blocks, scaled.blocks, moved.blocks)):
        assert a.attn.norm_lambda == schedule(depth)  # the paper's path passes λ_init itself: bit for bit as before
        assert 1 - b.attn.norm_lambda == pytest.approx(0.2) and b.attn.lambda_init == schedule(depth)
        assert c.attn.norm_lambda == schedule(depth) and c.attn.lambda_init == 0.8


def test_default_initialisation_draws_exactly_the_weights_it_always_drew():
    plain, explicit = built(), built(out_std=INIT_STD)
    changed = built(out_std=0.005)
    for (name, p), q, r in zip(plain.state_dict().items(), explicit.state_dict().values(), changed.state_dict().values()):
        assert torch.equal(p, q), name
        if "out_proj" not in name:  # redrawn after everything else: nothing else moves
            assert torch.equal(p, r), name
    assert float(changed.blocks[0].attn.out_proj.weight.detach().std()) == pytest.approx(0.005, rel=0.2)


def test_embedding_scale_and_norm_gain_reach_the_forward_pass():
    tokens = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(1))
    base = branch_rms(V1, tokens, seed=0)
    assert branch_rms(dataclasses.replace(V1, embed_scale=4.0), tokens, 0)["embedding"] == pytest.approx(
        4 * base["embedding"], rel=1e-6)
    small = branch_rms(dataclasses.replace(V1, subln_gain=0.1), tokens, 0)
    assert small["attention"][0] == pytest.approx(0.1 * base["attention"][0], rel=1e-4)  # out_proj is linear


@pytest.mark.parametrize("changes,message", [
    ({"attention": "baseline", "head_scale": 0.2}, "has none"),
    ({"head_scale": "depth"}, "head_scale must be"),
    ({"head_scale": -1.0}, "head_scale must be"),
    ({"subln_gain": 0.0}, "subln_gain"),
    ({"embed_scale": -2.0}, "embed_scale"),
])
def test_bad_initialisation_settings_fail_in_one_line(changes, message):
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(V1, **changes)


def test_v1_branch_dominates_the_residual_at_initialisation_and_the_baseline_does_not():
    """The measurement lesson 08 starts from: at step 0, V1's normalised heads put an attention branch several times
    the embedding's size into the residual; the baseline's branch is about the embedding's size."""
    m, c = build_configs("cpu-small", "diff_v1")
    b, _ = build_configs("cpu-small", "baseline")
    tokens = torch.randint(0, 256, (4, 64), generator=torch.Generator().manual_seed(0))
    v1, base = branch_rms(m, tokens, 0), branch_rms(b, tokens, 0)
    assert min(v1["attention"]) > 3 * v1["embedding"]
    assert max(base["attention"]) < 3 * base["embedding"]


def test_the_plan_shares_folders_with_lesson_08_and_lesson_11():
    runs = study.plan()
    outs = [r.out for r in runs]
    assert len(outs) == len(set(outs))
    cells = {r.name for r in runs if r.group == "init"}
    assert {name for name, _ in study.INIT_CELLS.values()} <= cells | {"diff_v1"}
    assert study.INIT_CELLS[("0.8", "0.2")][0] == run_name(0.8) and run_name(None) == "diff_v1"
    paper = next(r for r in runs if r.name == "diff_v1" and r.seed == 0 and r.task == "text")
    assert paper.out == default_out("cpu-small", "text", "diff_v1", 0)
    assert [r.task == "text" and r.name in config.VARIANTS for r in runs] == sorted(
        r.task == "text" and r.name in config.VARIANTS for r in runs)  # lesson 08's own runs go last
    for r in runs:
        r.configs()  # every declared run is a valid configuration
    with pytest.raises(ConfigError, match="groups"):
        study.plan(("text", "nonsense"))


def shrink(monkeypatch, tmp_path):
    """The study's presets and seeds, tiny: every run a few steps, two seeds."""
    monkeypatch.setenv("DIFFATTN_ROOT", str(tmp_path))
    small = config.Preset(dataclasses.replace(config.PRESETS["cpu-tiny"].model, max_seq_len=64),
                          config.TrainConfig(steps=4, batch_size=4, seq_len=32, eval_every=2, eval_sequences=8,
                                             warmup_steps=1, checkpoint_every=4), "test")
    recall = config.Preset(small.model, dataclasses.replace(small.train, task="rebind", seq_len=48), "test")
    monkeypatch.setitem(config.PRESETS, "cpu-small", small)
    monkeypatch.setitem(config.PRESETS, "cpu-recall", recall)
    for name in ("TEXT_SEEDS", "ALTERNATIVE_SEEDS", "RETRIEVAL_SEEDS", "SUITE_SEEDS"):
        monkeypatch.setattr(study, name, (0, 1))
    monkeypatch.setattr("diffattn.eval.study_summary.TEXT_SEEDS", (0, 1))
    monkeypatch.setattr(study, "RETRIEVAL_TASKS", {"needles": {"n_needles": 2, "n_queries": 2, "value_len": 2},
                                                   "rebind": {"n_keys": 4, "n_rebinds": 2, "n_queries": 2}})
    monkeypatch.setattr("diffattn.eval.study_summary.RETRIEVAL_TASKS", study.RETRIEVAL_TASKS)


def args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**({"jobs": 1, "groups": None, "summary_only": False, "note": None,
                                  "no_progress": True, "retrieval_preset": "cpu-recall", "retrieval_steps": None,
                                  "out": None} | kw))


def test_the_study_trains_what_is_missing_once_and_summarises_with_intervals_and_nulls(monkeypatch, tmp_path):
    shrink(monkeypatch, tmp_path)
    assert study_command.run(args()) == 0
    out = tmp_path / "outputs" / "study"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"] == len(study.plan())
    text = summary["text"]["variants"]
    assert text["baseline"]["vs_baseline"]["mean"] == 0.0
    assert len(text["diff_v1"]["vs_baseline"]["ci95"]) == 2 and len(text["diff_v1"]["gap_by_step"]) == 3
    cells = summary["init"]["cells"]
    assert cells["start_schedule-scale_schedule"]["vs_paper_v1"]["mean"] == 0.0
    assert set(cells) == {"start_schedule-scale_schedule", "start_0_8-scale_0_2", "start_schedule-scale_0_2",
                          "start_0_8-scale_schedule"}
    assert set(summary["init"]["effects"]) == {"lambda_start", "head_scale", "interaction"}
    assert set(summary["alternatives"]["changes"]) == {"norm_gain", "out_std", "embed_scale"}
    assert "gap_change" not in summary["alternatives"]["changes"]["norm_gain"]  # the baseline has no per-head norm
    rebind = summary["retrieval"]["rebind"]
    assert rebind["null"]["any_binding"] == 0.5 and rebind["null_rule"] in ("copy_any", "copy_unanswered",
                                                                          "copy_latest", "chance")
    run = rebind["variants"]["diff_v2"]["runs"][0]
    assert len(run["accuracy"]) == len(rebind["steps"]) == 3
    assert run["leaves_null_at"] in (None, *rebind["steps"])
    assert "vs_baseline" in rebind["variants"]["diff_v1"] and "vs_baseline" not in rebind["variants"]["baseline"]
    assert "nulls on those queries" in (out / "table.txt").read_text()
    passes = json.loads((out / "training.json").read_text())["passes"]
    assert passes[0]["runs_trained"] == len(study.plan())
    mtime = (tmp_path / "outputs" / "checkpoints" / "cpu-small" / "text" / "baseline" / "metrics.jsonl").stat().st_mtime
    assert study_command.run(args()) == 0  # nothing left to train: no second pass, no run touched
    assert len(json.loads((out / "training.json").read_text())["passes"]) == 1
    assert (tmp_path / "outputs" / "checkpoints" / "cpu-small" / "text" / "baseline" / "metrics.jsonl"
            ).stat().st_mtime == mtime


def test_a_summary_without_its_runs_is_a_one_line_error(monkeypatch, tmp_path):
    shrink(monkeypatch, tmp_path)
    with pytest.raises(ConfigError, match="holds no finished run"):
        study_command.run(args(summary_only=True, groups="text"))


def test_the_retrieval_group_can_run_on_another_preset_as_scripts_gpu_check_does():
    runs = study.plan(("retrieval",), "gpu-small", 300)
    assert {r.preset for r in runs} == {"gpu-small"} and {r.steps for r in runs} == {300}
    assert {r.task for r in runs} == set(study.RETRIEVAL_TASKS) and len(runs) == 2 * 3 * len(study.RETRIEVAL_SEEDS)
    with pytest.raises(ConfigError, match="retrieval-preset"):
        study.plan(("retrieval",), "gpu-huge")
