"""diffattn.eval: the probe reproduces the model and its effective maps have the right row sums; retrieval scoring
(margin rule, intervals and nulls, an oracle gets everything and a constant model nothing); allocation shares;
quantization; the λ-sweep table; and `diffattn eval` with its one-line errors."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from diffattn.training import checkpoint  # noqa: E402
from diffattn.cli import main  # noqa: E402
from diffattn.config import GPTConfig, matched_configs  # noqa: E402
from diffattn.data import retrieval as R  # noqa: E402
from diffattn.eval import allocation, lambda_sweep, outliers, quantize, needle_accuracy as retrieval  # noqa: E402
from diffattn.eval.probe import Probe  # noqa: E402
from diffattn.model.gpt import GPT  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
BASE = GPTConfig(n_layer=2, d_model=32, n_head=4, n_kv_head=2, max_seq_len=48)


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    return {v: GPT(c).eval() for v, c in matched_configs(BASE).items()}


@pytest.mark.parametrize("variant", ["baseline", "baseline_2h", "diff_v1", "diff_v2"])
def test_probe_reproduces_the_model_and_its_maps_have_the_right_row_sums(models, variant):
    model = models[variant]
    x = torch.randint(0, 256, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = model(x)
        with Probe(model) as probe:
            probed = model(x)
    torch.testing.assert_close(probed, plain, atol=1e-5, rtol=0)
    for layer, w in probe.effective_maps().items():
        assert torch.all(w.triu(diagonal=1) == 0), "a map looks at the future"
        if variant == "diff_v1":
            expected = 1 - model.blocks[layer].attn.lambda_full().item()
        elif variant == "diff_v2":
            expected = 1 - probe.gates[layer].permute(0, 2, 1)  # (b, h, N)
        else:
            expected = 1.0
        torch.testing.assert_close(w.sum(-1), torch.as_tensor(expected).expand_as(w.sum(-1)).float(), atol=1e-5, rtol=0)
    assert len(probe.hidden) == BASE.n_layer
    with torch.no_grad():  # the kernels are back once the probe is closed
        torch.testing.assert_close(model(x), plain, atol=0, rtol=0)


def test_absmax_quantizer_levels_and_bits():
    z = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    visible = torch.ones(8, 8, dtype=torch.bool).tril()
    for bits in (2, 4, 8):
        q = quantize.absmax_quantizer(bits)(z, visible)
        step = z.masked_fill(~visible, 0).abs().amax(dim=(-2, -1), keepdim=True) / (2 ** (bits - 1) - 1)
        assert torch.all(((q - z).abs() <= step / 2 + 1e-6)[..., visible])
        levels = {round(v, 5) for v in (q / step)[..., visible].flatten().tolist()}
        assert len(levels) <= 2 ** bits - 1
    assert (quantize.absmax_quantizer(16)(z, visible) - z)[..., visible].abs().max() < 1e-3
    for bad in (1, 17, 0):
        with pytest.raises(ValueError, match="2 to 16"):
            quantize.check_bits([bad])


class Oracle(torch.nn.Module):
    """Reads the bytes: after `?KEY=` (and each value byte) it predicts the next byte of KEY's value, by 1.0 logit."""

    def __init__(self, max_seq_len: int, sure: float = 1.0):
        super().__init__()
        self.config = dataclasses.replace(BASE, max_seq_len=max_seq_len)
        self.sure = sure

    def forward(self, tokens):
        logits = torch.zeros(*tokens.shape, 256)
        for b, row in enumerate(tokens.tolist()):
            text = bytes(row).decode("latin-1")
            for p in range(len(text)):
                start = text.rfind("?", 0, p + 1)
                if start < 0 or "=" not in text[start:p + 1]:
                    continue
                key, typed = text[start + 1:p + 1].split("=", 1)
                record = text.find(f"#{key}=")
                if record >= 0:
                    value = text[record + len(key) + 2:]
                    if len(typed) < len(value):
                        logits[b, p, ord(value[len(typed)])] = self.sure
        return logits


def test_an_oracle_answers_everything_and_the_margin_rule_needs_a_clear_win():
    perfect = retrieval.table2(Oracle(64), [48, 64], samples=2)
    asked_per_example = {"N1R1": 1, "N2R2": 2, "N4R2": 2, "N6R2": 2}
    assert perfect["overall"]["accuracy"] == 1.0
    assert perfect["overall"]["asked"] == sum(asked_per_example.values()) * 2 * len(retrieval.DEPTHS) * 2
    assert set(perfect["layouts"]) == {"N1R1", "N2R2", "N4R2", "N6R2"}
    unsure = retrieval.table2(Oracle(64, sure=retrieval.MARGIN / 2), [64], samples=2)
    assert unsure["overall"]["answered"] == 0  # the right byte, but not by the margin
    with pytest.raises(ValueError, match="longer than"):
        retrieval.table2(Oracle(64), [65], samples=1)
    sure = retrieval.table2(Oracle(64), [64], samples=2)
    gap = retrieval.paired(sure, unsure)["overall"]  # the same examples: every query answered by one only
    assert set(retrieval.paired(sure, unsure)["layouts"]) == set(sure["layouts"])
    assert gap["difference"] == 1.0 and gap["ci95"] == [1.0, 1.0] and gap["above"]
    assert sure["overall"]["vs_null"]["above"] and not sure["layouts"]["N1R1"]["vs_null"]["above"]  # null 1 at N=1


class CopyLatest(Oracle):
    """Never reads the key: after `?KEY=` it predicts the value of the last record before the queries."""

    def forward(self, tokens):
        logits = torch.zeros(*tokens.shape, 256)
        for b, row in enumerate(tokens.tolist()):
            text = bytes(row).decode("latin-1")
            context = text[:text.find("?")] if "?" in text else text
            last = context.rfind("#")
            value = context[context.find("=", last) + 1:][:1]
            for p in range(len(text)):
                if text[p] == "=" and "?" in text[:p] and value:
                    logits[b, p, ord(value)] = 1.0
        return logits


def test_a_model_that_copies_without_reading_the_key_scores_its_null_and_does_not_retrieve():
    table = retrieval.table2(CopyLatest(64), [64], samples=4)
    for name, r in retrieval.rows(table).items():
        assert r["accuracy"] == pytest.approx(r["null"]["copy_latest"]), name
        assert not r["vs_null"]["above"], name


def test_allocation_shares_of_an_untrained_model(models):
    items = R.examples("needles", 3, 40, torch.Generator().manual_seed(3), n_needles=4, n_queries=2)
    base = allocation.shares(models["baseline"], items)
    assert base["answer"].shape == (6, BASE.n_layer, BASE.n_head)
    assert torch.all(base["answer"] >= 0) and torch.all(base["answer"] + base["haystack"] <= 1 + 1e-6)
    v1 = allocation.shares(models["diff_v1"], items)
    assert torch.all(v1["answer"].abs() + v1["haystack"].abs() <= 1 + 1e-6)
    result = allocation.allocation(models["diff_v2"], 40, samples=2, depths=(0.0, 1.0))
    assert set(result["best_head"]["by_depth"]) == {"0.00", "1.00"}


def test_outliers_statistics(models):
    x = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(4))
    out = outliers.outliers(models["diff_v1"], x)
    assert len(out["logits"]) == len(out["hidden"]) == BASE.n_layer
    for s in out["logits"] + out["hidden"]:
        assert s["top1"] >= s["median"] > 0 and s["ratio"] == pytest.approx(s["top1"] / s["median"])
    assert sum(out["histograms"]["hidden"]["counts"]) == 2 * 24 * BASE.d_model * BASE.n_layer


def test_sweep_table_marks_the_trained_row_and_restores(models):
    model = models["diff_v1"]
    x = torch.randint(0, 256, (1, 10), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        before = model(x)
    table = lambda_sweep.sweep_table(model, [0.0, 1.0, 2.0], "scale", lambda m: {"out": m(x).sum().item()})
    assert [r["value"] for r in table["rows"]] == [None, 0.0, 1.0, 2.0] and table["trained_value"] == 1.0
    assert table["rows"][0]["out"] == pytest.approx(table["rows"][2]["out"], abs=1e-4)
    assert table["rows"][1]["out"] != pytest.approx(table["rows"][3]["out"], abs=1e-3)
    with torch.no_grad():
        assert torch.equal(model(x), before)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        lambda_sweep.sweep_table(models["diff_v2"], [0.5, 1.0], "fixed", lambda m: {})
    with pytest.raises(ValueError, match="no λ"):
        lambda_sweep.sweep_table(models["baseline"], [0.5], "fixed", lambda m: {})


# ---- the command line ---------------------------------------------------------------------------------------------

def save(model: GPT, directory: Path, attention: str | None = None) -> Path:
    opt = torch.optim.AdamW(model.parameters())
    config = {"model": dataclasses.asdict(model.config), "train": {"steps": 0}, "task": {"name": "needles",
                                                                                         "data": None, "options": {}}}
    if attention:
        config["model"]["attention"] = attention
    return checkpoint.save_checkpoint(directory, model=model, optimizer=opt,
                                      scheduler=torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0), step=0,
                                      rng={}, config=config)


@pytest.fixture(scope="module")
def ckpts(models, tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpts")
    dirs = {v: save(models[v], root / v) for v in ("baseline", "diff_v1", "diff_v2")}
    dirs["unknown"] = save(models["baseline"], root / "unknown", attention="diff_v3")
    dirs["truncated"] = root / "truncated"
    dirs["truncated"].mkdir()
    data = (dirs["baseline"] / checkpoint.CHECKPOINT_FILE).read_bytes()
    (dirs["truncated"] / checkpoint.CHECKPOINT_FILE).write_bytes(data[: len(data) // 2])
    return dirs


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT / "code"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "diffattn", "eval", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


def test_eval_cli_writes_json(ckpts, tmp_path):
    out = tmp_path / "r.json"
    run = cli("retrieval", "--ckpt", str(ckpts["diff_v2"]), "--lengths", "48", "--samples", "1", "--json", str(out))
    assert run.returncode == 0, run.stderr
    assert "N6R2" in run.stdout and json.loads(out.read_text())["samples_per_cell"] == 1


@pytest.mark.parametrize("kind, which, extra, message", [
    ("retrieval", "missing", [], "does not exist"),
    ("retrieval", "truncated", [], "truncated or corrupt"),
    ("retrieval", "unknown", [], "unknown attention variant"),
    ("retrieval", "diff_v1", ["--lengths", "49"], "longer than"),
    ("quantize", "diff_v1", ["--bits", "8,1"], "2 to 16"),
    ("quantize", "diff_v1", ["--bits", "17"], "2 to 16"),
    ("lambda-sweep", "diff_v2", ["--values", "0.5,1.0"], r"\(0, 1\)"),
    ("lambda-sweep", "diff_v2", ["--mode", "offset", "--values", "nan"], "finite"),
    ("lambda-sweep", "baseline", [], "DIFF checkpoint"),
    ("lambda-sweep", "diff_v1", ["--mode", "offset"], "--mode"),
])
def test_eval_cli_bad_input_is_one_line_and_exit_2(ckpts, tmp_path, capsys, kind, which, extra, message):
    directory = ckpts.get(which, tmp_path / "nothing-here")
    assert main(["eval", kind, "--ckpt", str(directory), "--samples", "1", *extra]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert re.search(message, lines[0]), lines[0]


def test_many_needles_pools_the_4_and_6_needle_layouts_with_their_null():
    from diffattn.eval.kinds import many_needles

    table = retrieval.table2(Oracle(64), [64], samples=3)
    pooled = many_needles(table)
    assert pooled["asked"] == table["layouts"]["N4R2"]["asked"] + table["layouts"]["N6R2"]["asked"] == 2 * 2 * 3 * 5
    assert pooled["accuracy"] == 1.0 and pooled["vs_null"]["above"]
    assert pooled["null_best"] < table["overall"]["null_best"]  # one needle's null is 1: the pool leaves it out


@pytest.mark.parametrize("extra, message", [([], "--preset"), (["--preset", "cpu-tiny", "--seeds", "0"], "--seeds")])
def test_eval_suite_bad_input_is_one_line_and_exit_2(capsys, extra, message):
    assert main(["eval", "suite", *extra]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines


def _tiny_suite_preset(monkeypatch, tmp_path, steps: int = 9, warmup_steps: int = 5) -> Path:
    """cpu-tiny with a few small steps, its runs under tmp_path; returns where `eval suite` writes."""
    from diffattn import config

    monkeypatch.setenv("DIFFATTN_ROOT", str(tmp_path))
    monkeypatch.setitem(config.PRESETS, "cpu-tiny", config.Preset(
        config.PRESETS["cpu-tiny"].model,
        config.TrainConfig(steps=steps, batch_size=4, seq_len=32, eval_every=2, eval_sequences=4, checkpoint_every=2,
                           warmup_steps=warmup_steps),
        "test"))
    return tmp_path / "outputs" / "eval" / "cpu-tiny"


def test_eval_suite_writes_every_kind_and_a_seed_summary(tmp_path, monkeypatch, capsys):
    """`make train-small` and scripts/gpu_check.sh run this: checkpoints trained on first use (2 steps here), every
    kind on seed 0, retrieval on the other seeds, summary.json with the machine and the 4-6-needle accuracy per seed."""
    from diffattn.eval import saved

    out = _tiny_suite_preset(monkeypatch, tmp_path, steps=2, warmup_steps=1)
    monkeypatch.setattr(saved, "SUITE_PRESETS", ("cpu-tiny",))
    assert main(["eval", "suite", "--preset", "cpu-tiny", "--seeds", "2", "--samples", "1", "--lengths", "32"]) == 0
    kinds = {v: sorted(p.name for p in (out / v).glob("*.json")) for v in ("baseline", "diff_v1", "diff_v2")}
    assert kinds["baseline"] == ["allocation.json", "outliers.json", "quantize.json", "retrieval.json"]
    assert kinds["diff_v1"] == kinds["diff_v2"] == sorted(kinds["baseline"] + ["lambda_sweep.json"])
    assert [p.name for p in (out / "diff_v2" / "seed1").iterdir()] == ["retrieval.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seeds"] == 2 and "cpu" in summary["machine"]
    for variant, r in summary["variants"].items():
        seed1 = json.loads((out / variant / "seed1" / "retrieval.json").read_text())
        assert [run["seed"] for run in r["runs"]] == [0, 1]
        assert r["runs"][1]["many_needles"]["asked"] == seed1["layouts"]["N4R2"]["asked"] + seed1["layouts"]["N6R2"]["asked"]
    found = saved.suites()["cpu-tiny"]  # what lessons 09-11 read back
    assert found["summary"] == summary and set(found["variants"]["diff_v1"]) == {p[:-5] for p in kinds["diff_v1"]}


def test_eval_suite_trains_with_the_steps_it_is_given(tmp_path, monkeypatch):
    """scripts/gpu_check.sh passes --steps and --warmup-steps: the checkpoints are trained with them, not the preset's
    (the GPU run used to train gpu-small's full 1,200 steps against a 60 s limit)."""
    _tiny_suite_preset(monkeypatch, tmp_path)
    assert main(["eval", "suite", "--preset", "cpu-tiny", "--steps", "2", "--warmup-steps", "1", "--no-compile",
                 "--samples", "1", "--lengths", "32"]) == 0
    state = checkpoint.load_checkpoint(tmp_path / "outputs" / "checkpoints" / "cpu-tiny" / "needles" / "diff_v1")
    assert state["step"] == 2 and state["config"]["train"]["warmup_steps"] == 1
    assert state["config"]["train"]["compile"] is False


@pytest.mark.parametrize("error, status", [(RuntimeError("out of memory\nsecond line"), 1), (KeyboardInterrupt(), 130)])
def test_eval_suite_keeps_every_variant_that_finished(tmp_path, monkeypatch, error, status):
    """A variant that fails (here its evaluation raises) costs that variant only; an interrupt (the SIGTERM of a time
    limit arrives as KeyboardInterrupt, diffattn.core.errors.interrupt_as_exception) stops the suite. Either way
    summary.json holds every variant finished before, marked incomplete."""
    from diffattn.eval import kinds as command

    out = _tiny_suite_preset(monkeypatch, tmp_path)
    real = command.evaluate

    def failing_for_v1(kind, model, config, args):
        if model.config.attention == "diff_v1":
            raise error
        return real(kind, model, config, args)

    monkeypatch.setattr(command, "evaluate", failing_for_v1)
    assert main(["eval", "suite", "--preset", "cpu-tiny", "--steps", "2", "--warmup-steps", "1", "--samples", "1",
                 "--lengths", "32"]) == status
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and "baseline" in summary["variants"] and "diff_v1" not in summary["variants"]
    if status == 1:
        assert summary["failed"] == {"diff_v1 seed 0": "RuntimeError: out of memory"}
        assert "diff_v2" in summary["variants"]  # the variant after the failure still ran
    else:
        assert "diff_v2" not in summary["variants"]


def test_outliers_keep_only_visible_logits_and_fit_the_sequences_to_a_budget(models):
    """At gpu-small's size the maps of every layer were kept (about 144 GiB for V2): now each call's visible logits
    are kept on the CPU and the maps dropped, and the number of sequences fits outliers.LOGIT_BUDGET."""
    model = models["diff_v2"]
    calls = []
    original = Probe.__enter__

    def spy(self):
        calls.append(self)
        return original(self)

    inputs = torch.randint(0, 256, (2, 16))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Probe, "__enter__", spy)
        result = outliers.outliers(model, inputs)
    assert calls and calls[0].calls == []  # no (b, H, N, N_k) map retained
    visible = model.config.n_head * 2 * 16 * 17 // 2 * 2  # V2: 2·n_head maps, N(N+1)/2 visible pairs, 2 sequences
    assert sum(h for h in result["histograms"]["logits"]["counts"]) == visible * model.config.n_layer
    big = GPTConfig(n_layer=12, d_model=768, n_head=12, n_kv_head=12, max_seq_len=2048)
    for variant, wanted in (("diff_v2", 1), ("baseline", 1), ("diff_v1", 1)):
        sized = type("M", (), {"config": matched_configs(big)[variant]})()
        assert outliers.sequences_within_budget(sized, 2048, wanted=16) == wanted
    small = type("M", (), {"config": matched_configs(GPTConfig(n_layer=4, d_model=128, n_head=4, n_kv_head=2,
                                                               max_seq_len=256))["diff_v2"]})()
    assert outliers.sequences_within_budget(small, 256, wanted=16) == 16  # cpu-small: lesson 10's 16 sequences
