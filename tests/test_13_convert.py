"""Lesson 13: `diffattn convert` and the LoRA-only variant (diffattn.training.warmstart).

DIFF V2's conversion must give the baseline's logits at step 0 (max |Δ| ≤ 1e-5 in fp32) on the shipped checkpoint and
on random baselines of several head layouts, and stay trainable; the near-misses a converter could make (a zeroed
second query, W_O not doubled) must fail the same check. DIFF V1 cannot be exact (its per-head RMSNorm); its
conversion keeps each first-half map exactly and sets λ to 0, which is what is tested, and its step-0 gap is measured.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest
import torch

from diffattn import cli
from diffattn.training.checkpoint import load_model, save_weights
from diffattn.config import GPTConfig
from diffattn.model.gpt import GPT
from diffattn.nn.functional import query_head_groups
from diffattn.nn.rope import rope_cos_sin
from diffattn.training.warmstart.convert import step0_gap, to_diff_v1, to_diff_v2, v1_query_order
from diffattn.training.warmstart.lora import lora_only, trainable_parameters

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "outputs" / "models" / "cpu-tiny" / "text" / "baseline"
TOLERANCE = 1e-5  # fp32, the figure to reach
LAYOUTS = [(4, 2, 16), (4, 4, 16), (8, 2, 8), (6, 3, 8)]  # (heads, KV heads, head_dim)


def random_baseline(heads: int, kv: int, head_dim: int, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig(n_layer=2, d_model=heads * head_dim, n_head=heads, n_kv_head=kv, max_seq_len=32))
    with torch.no_grad():  # trained-looking weights: larger than the N(0, 0.02) init, so attention maps are not flat
        for p in model.parameters():
            p.mul_(10.0 if p.dim() == 2 else 1.0)
    return model.eval()


def tokens(seed: int = 1, batch: int = 3, length: int = 32) -> torch.Tensor:
    return torch.randint(0, 256, (batch, length), generator=torch.Generator().manual_seed(seed))


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------------------------------------ DIFF V2


@pytest.mark.parametrize("layout", LAYOUTS)
def test_v2_conversion_keeps_the_logits(layout):
    base = random_baseline(*layout)
    gap = step0_gap(base, to_diff_v2(base), tokens())
    assert gap["max_abs_logit"] > 1.0, "the check needs logits that are not all near 0"
    assert gap["max_abs_logit_gap"] <= TOLERANCE, gap


def test_v2_conversion_of_the_shipped_checkpoint_keeps_logits_and_loss():
    base, _ = load_model(SHIPPED)
    x = tokens(length=128, batch=4)
    gap = step0_gap(base, to_diff_v2(base), x[:, :-1], x[:, 1:])
    assert gap["max_abs_logit_gap"] <= TOLERANCE and abs(gap["loss_before"] - gap["loss_after"]) <= TOLERANCE, gap


def near_misses(base: GPT) -> dict[str, GPT]:
    """Conversions a converter could plausibly write instead: each must move the logits well past the tolerance."""
    zero_second, no_double = to_diff_v2(base), to_diff_v2(base)
    h, d = base.config.n_head, base.config.head_dim
    with torch.no_grad():
        for block in zero_second.blocks:  # axolotl's "zero the negative half": A_2i+1 becomes the causal mean of V
            block.attn.q_proj.weight.view(h, 2, d, -1)[:, 1] = 0.0
        for block in no_double.blocks:  # forgets that σ(0) = ½ halves every head
            block.attn.o_proj.weight.mul_(0.5)
    return {"zeroed second query": zero_second, "W_O not doubled": no_double}


def test_the_logit_check_rejects_near_miss_conversions():
    base = random_baseline(4, 2, 16)
    for name, wrong in near_misses(base).items():
        assert step0_gap(base, wrong, tokens())["max_abs_logit_gap"] > 1e-2, name


def test_v2_conversion_is_trainable_the_pair_moves_apart_and_lambda_learns():
    base = random_baseline(4, 2, 16)
    v2 = to_diff_v2(base).train()
    x = tokens()
    torch.nn.functional.cross_entropy(v2(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten()).backward()
    attn, h, d = v2.blocks[0].attn, 4, 16
    grad = attn.q_proj.weight.grad.view(h, 2, d, -1)
    assert grad[:, 0].abs().max() > 0 and attn.lambda_proj.weight.grad.abs().max() > 0
    # at step 0 (σ(λ) = ½ everywhere) the second copy's gradient is exactly −½ the first's: the copies separate
    torch.testing.assert_close(grad[:, 1], -0.5 * grad[:, 0], rtol=1e-4, atol=1e-9)


# ------------------------------------------------------------------------------------------------------ DIFF V1


@pytest.mark.parametrize("layout", [(4, 2, 16), (8, 2, 8), (8, 4, 8), (4, 4, 16)])
def test_v1_query_order_keeps_every_query_on_its_own_keys(layout):
    heads, kv, _ = layout
    order = v1_query_order(heads, kv)
    assert sorted(order) == list(range(heads))  # a permutation: every baseline query head is used once
    base_groups, v1_groups = query_head_groups(heads, kv), query_head_groups(heads // 2, kv // 2)
    for i in range(heads // 2):  # V1 head i: q1 reads baseline KV head 2g, q2 reads 2g + 1
        g = v1_groups[i]
        assert (base_groups[order[2 * i]], base_groups[order[2 * i + 1]]) == (2 * g, 2 * g + 1)


@pytest.mark.parametrize("layout", [(4, 2, 16), (8, 2, 8)])
def test_v1_conversion_keeps_each_first_map_and_starts_lambda_at_zero(layout):
    base = random_baseline(*layout)
    v1 = to_diff_v1(base, tokens(seed=5)).eval()
    heads, kv, d = layout
    order, x = v1_query_order(heads, kv), torch.randn(2, 16, heads * d, generator=torch.Generator().manual_seed(3))
    rope = rope_cos_sin((0, 16), d, base=base.config.rope_base, dtype=torch.float32)
    for b_block, v_block in zip(base.blocks, v1.blocks):
        assert abs(v_block.attn.lambda_full().item()) < 1e-6
        seen = {}
        hook = b_block.attn.out_proj.register_forward_hook(lambda m, args, out: seen.update(heads=args[0]))
        with torch.no_grad():
            b_block.attn(x, rope)
            diff = v_block.attn.differential_heads(x, rope)  # (b, N, h/2, 2d), before the norm
        hook.remove()
        baseline_heads = seen["heads"].view(2, 16, heads, d)
        for i in range(heads // 2):  # the first half of V1 head i is baseline head order[2i]'s output, exactly
            torch.testing.assert_close(diff[:, :, i, :d], baseline_heads[:, :, order[2 * i]], rtol=1e-5, atol=1e-5)


def test_v1_conversion_cannot_be_exact_and_its_gap_is_measured():
    """V1's RMSNorm divides each head by its own per-token RMS: the logits move. The gap is finite and smaller than
    the logits themselves; a converted model is not the baseline, which is why lesson 13 trains it on."""
    base, config = load_model(SHIPPED)
    x = tokens(length=128, batch=4)
    gap = step0_gap(base, to_diff_v1(base, tokens(seed=7, length=128, batch=8)), x[:, :-1], x[:, 1:])
    assert TOLERANCE < gap["max_abs_logit_gap"] < gap["max_abs_logit"]
    assert gap["loss_after"] > gap["loss_before"]


# --------------------------------------------------------------------------------------------------------- LoRA


def test_lora_only_starts_at_the_conversion_and_trains_only_its_branch():
    base = random_baseline(4, 2, 16)
    lora = lora_only(to_diff_v2(base), rank=2)
    d_model, h, d = 64, 4, 16
    assert trainable_parameters(lora) == 2 * (2 * (d_model + h * d) + h * d_model)  # 2 layers
    x = tokens()
    assert step0_gap(base, lora, x)["max_abs_logit_gap"] <= TOLERANCE
    before = {k: v.clone() for k, v in lora.state_dict().items()}
    optimizer = torch.optim.AdamW([p for p in lora.parameters() if p.requires_grad], lr=1e-2)
    lora.train()
    torch.nn.functional.cross_entropy(lora(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten()).backward()
    optimizer.step()
    changed = {k for k, v in lora.state_dict().items() if not torch.equal(v, before[k])}
    assert changed == {f"blocks.{i}.attn.{n}" for i in range(2) for n in ("q_proj.lora_a.weight", "q_proj.lora_b", "lambda_proj.weight")}
    probe = torch.randn(1, 5, d_model)  # after the step only the odd query heads read differently
    with torch.no_grad():
        q = lora.blocks[0].attn.q_proj(probe).view(1, 5, h, 2, d)
        q0 = to_diff_v2(base).blocks[0].attn.q_proj(probe).view(1, 5, h, 2, d)
    assert torch.equal(q[:, :, :, 0], q0[:, :, :, 0]) and not torch.allclose(q[:, :, :, 1], q0[:, :, :, 1])


# ------------------------------------------------------------------------------------------------ the command


def test_convert_command_writes_a_model_with_the_same_logits(tmp_path):
    code, out, err = run_cli("convert", str(SHIPPED), "--to", "diff_v2", "--out", str(tmp_path / "v2"))
    assert code == 0 and err == "" and "largest |logit change| 0" in out, (out, err)
    converted, config = load_model(tmp_path / "v2")
    base, _ = load_model(SHIPPED)
    assert config["model"]["attention"] == "diff_v2" and config["converted_from"]["step0"]["max_abs_logit_gap"] <= TOLERANCE
    assert step0_gap(base, converted, tokens(length=64))["max_abs_logit_gap"] <= TOLERANCE


def foreign_checkpoints(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """name: (arguments, a phrase the one-line error must contain)."""
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "model.safetensors").write_bytes((SHIPPED / "model.safetensors").read_bytes()[:1000])
    (truncated / "config.json").write_text((SHIPPED / "config.json").read_text())
    occupied = tmp_path / "occupied"
    save_weights(occupied, GPT(GPTConfig(n_layer=1, d_model=32, n_head=2)), {"model": {}})
    (tmp_path / "empty").mkdir()
    configs = {"invalid-json": "{bad", "json-list": "[1, 2]", "model-not-object": '{"model": 3}'}
    for name, text in configs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes((SHIPPED / "model.safetensors").read_bytes())
        (tmp_path / name / "config.json").write_text(text)
    v1, v2 = SHIPPED.parent / "diff_v1", SHIPPED.parent / "diff_v2"
    return {
        "a DIFF V1 checkpoint": (["convert", str(v1)], "starts from a baseline checkpoint; this one is diff_v1"),
        "a DIFF V2 checkpoint": (["convert", str(v2)], "starts from a baseline checkpoint; this one is diff_v2"),
        "a missing folder": (["convert", str(tmp_path / "nowhere")], "does not exist"),
        "an empty folder": (["convert", str(tmp_path / "empty")], "no checkpoint in"),
        "a file for the folder": (["convert", str(SHIPPED / "model.safetensors")], "is a file, not a checkpoint folder"),
        "a config that is not JSON": (["convert", str(tmp_path / "invalid-json")], "config.json is not valid JSON"),
        "a JSON list for a config": (["convert", str(tmp_path / "json-list")], "is not a checkpoint's config"),
        "a config whose model is a number": (["convert", str(tmp_path / "model-not-object")],
                                             "is not a checkpoint's config"),
        "a truncated file": (["convert", str(truncated)], "truncated or corrupt"),
        "an unknown target": (["convert", str(SHIPPED), "--to", "diff_v3"], "--to must be one of"),
        "an occupied output": (["convert", str(SHIPPED), "--out", str(occupied)], "already holds a model"),
    }


def test_convert_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path):
    for name, (args, phrase) in foreign_checkpoints(tmp_path).items():
        before = sorted(p for p in tmp_path.rglob("*"))
        out_dir = tmp_path / "out"
        code, out, err = run_cli(*args, *([] if "--out" in args else ["--out", str(out_dir)]))
        assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: ") and phrase in err, (name, err)
        assert sorted(p for p in tmp_path.rglob("*")) == before, name
    assert sorted(p.name for p in SHIPPED.parent.iterdir()) == ["baseline", "diff_v1", "diff_v2"]


def test_transformers_export_and_import_without_transformers_is_one_line(tmp_path, monkeypatch):
    """transformers is a dev-only extra (tests/test_13_hf.py runs where it is installed): without it, `--to hf` and
    `--from-hf` stop with one line naming the install command, and write nothing."""
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    for args in (["convert", str(SHIPPED), "--to", "hf"], ["convert", str(SHIPPED), "--from-hf"]):
        code, out, err = run_cli(*args, "--out", str(tmp_path / "out"))
        assert code == 2 and out == "" and err.count("\n") == 1 and "pip install -e '.[hf]'" in err, (args, err)
        assert list(tmp_path.iterdir()) == [], args
