"""Lesson 09's retrieval layouts (padding position, which keys rebind asks), the effect-size criterion, the declared
recall sweep and V2's mechanism controls."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from diffattn.config import GPTConfig, build_configs, parse_task_options, run_config
from diffattn.data import nulls
from diffattn.data.retrieval import BAR, PAD, examples, mqar_example, rebind_example
from diffattn.core.errors import ConfigError
from diffattn.eval import criterion, sweep
from diffattn.eval.sweep_report import learned_map, table


def _gen(seed: int = 3) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("seed", range(5))
def test_padding_at_the_end_moves_only_the_padding(seed):
    between = mqar_example(_gen(seed), 64, 8, 8)
    end = mqar_example(_gen(seed), 64, 8, 8, pad="end")
    assert between.tokens == mqar_example(_gen(seed), 64, 8, 8, pad="between").tokens  # the default is unchanged
    pairs, rest = between.tokens[:16], between.tokens[16:]
    queries = rest[rest.index(BAR):]
    assert end.tokens == pairs + queries + (PAD,) * (len(rest) - len(queries))
    assert end.tokens[end.context_end] == BAR and end.context_end == 16
    for q in end.queries:  # each answer position's target is the asked key's value
        assert bytes([end.tokens[q.answer[0] + 1]]) == q.value and bytes([end.tokens[q.answer[0]]]) == q.key
    assert [q.key for q in end.queries] == [q.key for q in between.queries]


@pytest.mark.parametrize("seed", range(5))
def test_rebind_asking_every_key_answers_with_the_latest_binding(seed):
    e = rebind_example(_gen(seed), 64, 8, 4, 8, ask="all", pad="end")
    assert len(e.queries) == 8 and len({q.key for q in e.queries}) == 8  # every key, clean and rebound
    for q in e.queries:
        latest = [r for r in e.records if r.key == q.key][-1]
        assert (q.value, q.record) == (latest.value, latest.span)
    rules = nulls.example_nulls(e)
    assert sorted(set(rules["any_binding"])) == [0.5, 1.0]  # rebound keys 1/2, clean keys 1
    default = rebind_example(_gen(seed), 64, 8, 4, 2)
    assert default.tokens == rebind_example(_gen(seed), 64, 8, 4, 2, ask="rebound", pad="between").tokens


@pytest.mark.parametrize("task, options, message", [
    ("mqar", {"pad": "middle"}, "pad must be one of between, end"),
    ("mqar", {"n_pairs": 8, "n_queries": 9}, "n_queries=9, n_pairs=8"),
    ("rebind", {"n_queries": 5, "n_rebinds": 4}, "n_queries=5, n_rebinds=4"),
    ("rebind", {"ask": "all", "n_keys": 8, "n_queries": 9}, "n_queries=9, n_keys=8"),
    ("rebind", {"ask": "some"}, "ask must be one of rebound, all"),
    ("mqar", {"n_pairs": 20, "n_queries": 20}, "too short"),
    ("needles", {"pad": "end"}, "needles"),
])
def test_impossible_layouts_name_the_option(task, options, message):
    with pytest.raises(ConfigError, match=message):
        examples(task, 1, 64, _gen(), **options)


def test_task_options_take_integers_and_words():
    assert parse_task_options(["n_queries=8", "pad=end", " ask = all "]) == {"n_queries": 8, "pad": "end", "ask": "all"}
    for bad in ("pad", "pad=", "pad=end now", "9x=1"):
        with pytest.raises(ConfigError, match="KEY=INTEGER or KEY=WORD"):
            parse_task_options([bad])


def test_an_impossible_layout_on_the_command_line_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "diffattn", "train", "--preset", "cpu-recall", "--variant",
                             "baseline", "--task", "mqar", "--task-option", "pad=middle", "--out", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith("error:") and "pad must be one of between, end" in result.stderr
    assert not out.exists()


# --- the criterion: an effect of a declared size, not only a significant one ---------------------------------------

def _verdict(accuracy: float, null: float, queries: int = 512, any_binding: float = 1.0) -> dict:
    answered = round(accuracy * queries)
    flags = [1.0] * answered + [0.0] * (queries - answered)
    rules = {"copy_any": [null] * queries, "copy_unanswered": [0.0] * queries, "copy_latest": [0.0] * queries,
             "chance": [0.0] * queries, "any_binding": [any_binding] * queries}
    return criterion.verdict(flags, rules, [i // 2 for i in range(queries)])


def test_a_plateau_above_its_null_is_significant_but_does_not_retrieve():
    plateau = _verdict(0.38, 0.34, queries=20000)
    assert plateau["vs_null"]["above"] and not plateau["retrieves"]  # the old rule would have said "retrieves"
    assert _verdict(1.0, 0.34)["retrieves"] and _verdict(0.80, 0.34)["retrieves"]
    assert not _verdict(0.60, 0.34)["retrieves"]  # 0.26 over the null: less than half of the 0.66 left
    assert not _verdict(1.0, 1.0)["retrieves"]  # a null of 1 leaves nothing to show


def test_on_rebind_a_model_must_also_beat_the_order_blind_rule():
    assert not _verdict(0.45, 0.20, any_binding=0.5)["retrieves"]  # finds keys, ignores which binding came last
    assert not _verdict(0.62, 0.20, any_binding=0.75)["retrieves"]  # past the margin, below any_binding
    assert _verdict(0.95, 0.20, any_binding=0.75)["retrieves"]
    assert criterion.margin(0.34) == pytest.approx(0.33)


# --- the declared sweep ------------------------------------------------------------------------------------------

def test_the_sweep_is_declared_once_with_its_budget():
    runs = sweep.plan(1)
    assert len(runs) == 95 and sum(r.steps for r in runs) == 300_000  # lesson 09 states both
    assert {r.seed for r in runs[:25]} == set(sweep.CENTRE_SEEDS) and all(r.name.startswith(
        f"sweep-{sweep.CENTRE.key}-") for r in runs[:25])
    assert len({r.out for r in runs}) == len(runs)
    for r in runs:  # every run builds (the layout fits the context) and names its cell
        model, train = r.configs()
        assert train.task_options == r.options and train.steps == r.steps and train.seq_len == 64


def test_stage_two_follows_up_at_most_two_separating_cells():
    cells = [c for c in sweep.CELLS if c != sweep.CENTRE]
    learned = {(c.key, n): [False, False] for c in cells for n in sweep.VARIANTS}
    assert len(sweep.plan(2, learned)) == 95
    for c in cells[:3]:
        learned[(c.key, "diff_v2")] = [True, True]
    learned[(cells[0].key, "baseline_2h")] = [True, False]  # the control learned once: this cell does not separate
    more = {r.out for r in sweep.plan(2, learned)} - {r.out for r in sweep.plan(1)}
    assert {r for r in more if cells[0].key in str(r)} == set()
    assert len(more) == 2 * 3 * len(sweep.VARIANTS)  # cells 1 and 2, seeds 2-4, every variant
    learned[(cells[1].key, "diff_v2")] = [True, False]  # one seed only: not a separation
    assert not sweep.separates(cells[1], learned)


def test_the_table_counts_seeds_that_learned():
    run = {"seed": 0, "learned": True, "leaves_plateau_at": 500, "final_accuracy": 0.99, "steps": [], "accuracy": []}
    variants = {n: {"runs": [run, {**run, "seed": 1, "learned": False, "final_accuracy": 0.35}], "seeds": 2,
                    "learned": 1} for n in sweep.VARIANTS}
    summary = {"preset": "cpu-recall", "margin_share": 0.5, "centre": sweep.CENTRE.key,
               "cells": {sweep.CENTRE.key: {"null": {"copy_unanswered": 0.34}, "null_rule": "copy_unanswered",
                                            "variants": variants}}}
    text = table(summary)
    assert "1/2 @500" in text and "0.99, 0.35" in text
    assert learned_map(summary)[(sweep.CENTRE.key, "diff_v2")] == [True, False]


# --- V2's mechanism controls -------------------------------------------------------------------------------------

def test_v2_controls_change_only_the_pair_and_the_gate():
    from diffattn.model.gpt import GPT

    base = GPTConfig(n_layer=1, d_model=32, n_head=2, n_kv_head=1, attention="diff_v2")
    torch.manual_seed(0)
    v2 = GPT(base)
    x = torch.randint(0, 256, (2, 12))
    outputs = {}
    for pair, gate in (("difference", "learned"), ("sum", "learned"), ("difference", "half")):
        model = GPT(GPTConfig(**{**base.__dict__, "v2_pair": pair, "v2_gate": gate}))
        model.load_state_dict(v2.state_dict())
        outputs[pair, gate] = model(x)
    assert torch.equal(outputs["difference", "learned"], v2(x))
    assert not torch.allclose(outputs["sum", "learned"], outputs["difference", "learned"])
    with torch.no_grad():  # with W_λ = 0 the learned gate is σ(0) = ½, which "half" fixes
        for block in v2.blocks:
            block.attn.lambda_proj.weight.zero_()
    half = GPT(GPTConfig(**{**base.__dict__, "v2_gate": "half"}))
    half.load_state_dict(v2.state_dict())
    assert torch.allclose(half(x), v2(x), atol=1e-6)
    with pytest.raises(ConfigError, match="v2_pair and v2_gate change DIFF V2"):
        GPTConfig(attention="baseline", v2_pair="sum")
    with pytest.raises(ConfigError, match="v2_pair is one of"):
        GPTConfig(attention="diff_v2", v2_gate="frozen")


def test_configs_record_the_later_fields_only_when_set():
    model, train = build_configs("cpu-recall", "diff_v2")
    assert "v2_pair" not in run_config("cpu-recall", model, train)["model"]  # earlier checkpoints keep their config
    model.v2_pair = "sum"
    assert run_config("cpu-recall", model, train)["model"]["v2_pair"] == "sum"
    json.dumps(run_config("cpu-recall", model, train))


def test_what_ships_follows_the_declared_rule():
    def cell(learned: dict[str, list[bool]]) -> dict:
        return {"variants": {n: {"runs": [{"seed": s, "learned": x} for s, x in enumerate(learned.get(n, [False] * 5))]}
                             for n in sweep.VARIANTS}}

    nothing = {"cells": {sweep.CENTRE.key: cell({})}}
    assert sweep.ship_choice(nothing) == (sweep.CENTRE.key, 0)
    v2 = {"diff_v2": [False, True, True, False, True]}
    assert sweep.ship_choice({"cells": {sweep.CENTRE.key: cell(v2)}}) == (sweep.CENTRE.key, 1)
    controlled = {**v2, "baseline_2h": [False, False, False, True, False]}  # the control learned once: not this cell
    summary = {"cells": {sweep.CENTRE.key: cell(controlled), sweep.REPLICATION.key: cell({"diff_v1": [True] * 5})}}
    assert sweep.ship_choice(summary) == (sweep.REPLICATION.key, 0)
    assert sweep.ship_choice({"cells": {sweep.CENTRE.key: cell({"diff_v2": [False, True, False, False, True]})}}) \
        == (sweep.CENTRE.key, 0)  # two of five is not most seeds


def test_stage_four_trains_the_same_layouts_at_a_lower_learning_rate():
    before, runs = sweep.plan(3), sweep.plan(4)
    added = runs[len(before):]
    assert runs[:len(before)] == before
    assert len(added) == 5 * 5 + 3 * 2 * 5 and {r.lr for r in added} == {sweep.SLOWER} == {1e-3}
    assert {r.configs()[1].lr for r in added} == {1e-3} and {r.configs()[1].lr for r in before} == {3e-3}
    first = sweep.LR_CELLS[0]
    assert (first.task, first.answers, first.pad, first.steps, first.seq_len) == (
        sweep.REPLICATION.task, sweep.REPLICATION.answers, sweep.REPLICATION.pad, sweep.REPLICATION.steps,
        sweep.REPLICATION.seq_len)
    assert first.key == "mqar-A8-end-S2000-T32-LR1e-3" and "." not in "".join(c.key for c in sweep.ALL_CELLS)
    mechanism = sweep.plan(5)[len(runs):]
    assert {r.name.removeprefix(f"sweep-{first.key}-") for r in mechanism} == set(sweep.MECHANISM)
    assert {r.seed for r in mechanism} == set(sweep.CENTRE_SEEDS)


def test_a_run_belongs_to_exactly_its_own_cell():
    """A cell's key can start another's ('…-S2000-T32' and '…-S2000-T32-LR1e-3'): a run is matched by its whole name."""
    from diffattn.eval.sweep_report import _cell_of, _variant_of

    for run in sweep.plan(5):
        cell = _cell_of(run)
        assert run.name == f"sweep-{cell.key}-{_variant_of(run)}"
        assert run.configs() == cell.run(_variant_of(run), run.seed).configs()


def test_a_summary_keeps_the_cells_no_run_here_can_recompute(tmp_path, monkeypatch):
    """Cells trained before (their checkpoint folders are not committed) stay in summary.json, in the declared order,
    and a cell recomputed from its runs replaces what was recorded of it."""
    from diffattn.eval import sweep_report
    from diffattn.core.results import write_json_atomic

    def cell(accuracy: float) -> dict:
        run = {"seed": 0, "learned": False, "leaves_plateau_at": None, "final_accuracy": accuracy, "steps": [100],
               "accuracy": [accuracy]}
        return {"null": {"copy_unanswered": 0.34}, "null_rule": "copy_unanswered", "margin": 0.33,
                "variants": {n: {"runs": [run], "seeds": 1, "learned": 0} for n in sweep.VARIANTS}}

    old, new = sweep.CENTRE.key, sweep.LR_CELLS[0].key
    write_json_atomic(tmp_path / "summary.json", {"cells": {new: cell(0.1), old: cell(0.38)}})
    monkeypatch.setattr(sweep_report, "summarise", lambda runs: {"preset": "cpu-recall", "centre": old,
                                                                  "margin_share": 0.5, "cells": {new: cell(0.99)}})
    summary = sweep_report.write([], tmp_path, tmp_path)
    assert list(summary["cells"]) == [old, new]
    assert summary["cells"][old]["variants"]["diff_v2"]["runs"][0]["final_accuracy"] == 0.38
    assert summary["cells"][new]["variants"]["diff_v2"]["runs"][0]["final_accuracy"] == 0.99


@pytest.mark.parametrize("name", [*sweep.VARIANTS, *sweep.MECHANISM])
def test_every_variant_of_the_sweep_trains_and_evaluates(name, tmp_path):
    """Three steps with a validation pass after each, through the sweep's own run config: a variant the sweep
    declares must train (σ(λ) fixed at ½ once failed here: its evaluation averaged the gates of a projection it
    never calls)."""
    import dataclasses

    from diffattn.training.checkpoint import read_metrics
    from diffattn.training.runs import train_fresh

    preset, model, c, _ = sweep.LR_CELLS[0].run(name, 0).job()
    train_fresh(preset, model, dataclasses.replace(c, steps=3, eval_every=1, eval_sequences=8), tmp_path / name)
    evals = [r for r in read_metrics(tmp_path / name) if "val_accuracy" in r]
    assert [r["step"] for r in evals][-1] == 3
    assert ("sigma_lambda" in evals[-1]) == (name in ("diff_v2", "diff_v2-sum"))
