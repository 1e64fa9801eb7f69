"""Lesson 13, dev-only: the course's models in and out of Hugging Face transformers (diffattn.training.warmstart.hf).

Skipped wherever transformers is not installed (a dev-only extra, never a dependency of diffattn); the command's
one-line error without it is tested in tests/test_13_convert.py, which always runs.

Two kinds of agreement are checked. The mapping: transformers computes three things in fp32 whatever the model's
dtype (its modeling files name torch.float32: the RoPE angles p·θ_i, RMSNorm's statistics, DiffLlama's λ dot
products); with those made fp64 too (`fp64_transformers`), an fp64 export and the course model agree to 1e-12 for
every layout and setting the export folds in, while each near-miss mapping misses by more than 1e-3. Both causes of
the fp32 gap are shown apart: without that patch fp64 models differ by ~1e-7, and an fp32 export keeps only the
rounding of the constants it folds into one weight (V1's γ into W_O, embed_scale into the embedding), a few 1e-8.
As shipped: plain transformers models in fp32 agree within fp32 rounding, max |Δ logit| ≤ 1e-5 on tiny random
models; on the trained checkpoints the fp32 angles of transformers' RoPE make the gap grow with position, so there it
is bounded relative to the logits, by the commands' own check (hf.AGREEMENT), which every near miss fails.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Iterator

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from diffattn import cli  # noqa: E402
from diffattn.training.checkpoint import load_model  # noqa: E402
from diffattn.config import GPTConfig  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.model.gpt import GPT  # noqa: E402
from diffattn.training.warmstart import hf  # noqa: E402
from diffattn.training.warmstart.convert import step0_gap, to_diff_v2  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "outputs" / "models" / "cpu-tiny" / "text"
MAPPING = 1e-12  # fp64 on both sides, transformers' fp32 steps included: fp64 rounding, nothing else
FOLDED = 1e-7  # an fp32 export in fp64 arithmetic: the fp32 rounding (6e-8 relative) of the folded weights
TOLERANCE = 1e-5  # fp32, the figure to reach

# name: GPTConfig fields beyond the defaults below; each is a case the mapping must get right
CASES = {
    "baseline GQA tied": dict(attention="baseline"),
    "baseline MHA untied, embed_scale": dict(attention="baseline", n_kv_head=4, tie_embeddings=False, embed_scale=3.0),
    "baseline head_dim ≠ d_model/heads": dict(attention="baseline", head_dim=8, rope_base=500.0),
    "V1 GQA": dict(attention="diff_v1"),
    "V1 8 heads, head_scale, untied": dict(attention="diff_v1", n_head=8, head_dim=8, head_scale=0.5,
                                           tie_embeddings=False),
    "V1 MHA": dict(attention="diff_v1", n_kv_head=4),
}


def course_model(seed: int = 0, **fields) -> GPT:
    """A tiny random course model whose norm gains (and V1's γ) are not 1, so that every fold is exercised."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**{"n_layer": 3, "d_model": 64, "n_head": 4, "n_kv_head": 2, "max_seq_len": 32, **fields}))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "subln" in name:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
    return model.eval()


def tokens(vocab: int = 256, batch: int = 3, length: int = 32, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


class Fp64Torch:
    """torch, except that torch.float32 (and its alias torch.float) is torch.float64."""

    float32 = float = torch.float64

    def __getattr__(self, name: str):
        return getattr(torch, name)


@contextlib.contextmanager
def fp64_transformers() -> Iterator[None]:
    """Every fp32 step transformers' Llama and DiffLlama name (RoPE angles, RMSNorm, λ) done in fp64 instead."""
    from transformers.models.diffllama import modeling_diffllama
    from transformers.models.llama import modeling_llama

    with pytest.MonkeyPatch.context() as patch:
        for module in (modeling_llama, modeling_diffllama):
            patch.setattr(module, "torch", Fp64Torch())
        yield


def fp64_gap(model: GPT, net, patched: bool = True) -> float:
    """max |Δ logit| with both models in fp64; `patched`: transformers' fp32 steps in fp64 as well."""
    model, net = model.double(), net.double()
    if not patched:
        return hf.logit_gap(model, net, tokens())["max_abs_logit_gap"]
    with fp64_transformers():
        rope = net.model.rotary_emb  # its inverse frequencies were computed in fp32 when it was built
        rope.inv_freq = type(rope).compute_default_rope_parameters(net.config)[0]
        return hf.logit_gap(model, net, tokens())["max_abs_logit_gap"]


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


# -------------------------------------------------------------------------------------------------- the mapping


@pytest.mark.parametrize("case", CASES)
def test_export_then_import_maps_every_weight(case):
    """fp64 everywhere: an fp64 export (its folds in fp64) and the import of an export agree to 1e-12."""
    model = course_model(**CASES[case])
    net = hf.to_hf(model)
    assert type(net).__name__ == ("DiffLlamaForCausalLM" if model.config.attention == "diff_v1" else "LlamaForCausalLM")
    back = hf.from_hf(net)  # net's own weights, moved: nothing to round
    assert back.config.attention == model.config.attention
    assert fp64_gap(back, net) <= MAPPING
    assert fp64_gap(model, hf.to_hf(model.double())) <= MAPPING


@pytest.mark.parametrize("case", CASES)
def test_the_fp32_gap_is_transformers_fp32_steps_and_the_folds(case):
    """What is left of the fp32 gap, cause by cause: fp64 models without the patch still differ at fp32 rounding
    (transformers' fp32 steps); an fp32 export, in fp64 arithmetic, differs by the fp32 rounding of the weights it
    folds a constant into (V1's γ and head scale into W_O, embed_scale into the embedding), and only there."""
    fields = CASES[case]
    model = course_model(**fields)
    assert fp64_gap(model, hf.to_hf(model.double()), patched=False) > 1e-9
    model = course_model(**fields)
    folded = fp64_gap(model, hf.to_hf(model))
    if fields["attention"] == "diff_v1" or fields.get("embed_scale", 1.0) != 1.0:
        assert MAPPING < folded <= FOLDED
    else:
        assert folded <= MAPPING


def near_misses(model: GPT) -> dict[str, object]:
    """Exports a converter could plausibly write instead; each must fail the mapping check by far."""
    nets = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf, "_rope_rows", lambda d: torch.arange(d))  # RoPE pairs left interleaved
        nets["RoPE rows not permuted"] = hf.to_hf(model)
    if model.config.attention == "diff_v1":
        real = hf._head_rows
        with pytest.MonkeyPatch.context() as patch:  # (q1_i, q2_i) read as consecutive HF heads
            patch.setattr(hf, "_head_rows", lambda heads, d, paired, rope: real(heads, d, False, rope))
            nets["V1 heads not regrouped"] = hf.to_hf(model)
        net = hf.to_hf(model)  # γ forgotten: W_O copied as it is
        with torch.no_grad():
            for layer, block in zip(net.model.layers, model.blocks):
                layer.self_attn.o_proj.weight.copy_(block.attn.out_proj.weight)
        nets["subln gain not folded"] = net
    return nets


@pytest.mark.parametrize("case", ["baseline GQA tied", "V1 GQA"])
def test_the_mapping_check_rejects_near_miss_mappings(case):
    model = course_model(**CASES[case])
    for name, net in near_misses(model).items():
        assert fp64_gap(model, net) > 1e-3, name


# --------------------------------------------------------------------------------------------- as shipped, fp32


@pytest.mark.parametrize("case", CASES)
def test_plain_transformers_models_agree_within_fp32_tolerance(case):
    model = course_model(**CASES[case])
    net = hf.to_hf(model)
    gap = hf.logit_gap(model, net, tokens())
    assert gap["max_abs_logit"] > 0.3, "the check needs logits that are not all near 0"
    assert gap["max_abs_logit_gap"] <= TOLERANCE, gap
    assert hf.logit_gap(hf.from_hf(net), net, tokens())["max_abs_logit_gap"] <= TOLERANCE


@pytest.mark.parametrize("kind", ["baseline", "diff_v1"])
def test_the_shipped_checkpoints_pass_the_commands_check_and_near_misses_fail_it(kind):
    """hf.AGREEMENT (1e-5 of the largest |logit|) on the commands' own tokens: the shipped checkpoints' fp32 gap
    (≤ 2.9e-6 of it wherever measured) passes, every near-miss mapping (≥ 1.9e-2 of it here) is refused."""
    model, _ = load_model(SHIPPED / kind)
    check = hf.check_tokens(model.config)
    gap = hf.logit_gap(model, hf.to_hf(model), check)
    assert gap["max_abs_logit"] > 1.0 and check.shape[1] == 128
    hf._require_agreement(gap, kind)
    for name, net in near_misses(model).items():
        with pytest.raises(ConfigError, match="differ by"):
            hf._require_agreement(hf.logit_gap(model, net, check), name)


def random_llama(seed: int = 0, **fields):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(**{
        "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "tie_word_embeddings": False,
        "initializer_range": 0.1, **fields})
    return transformers.LlamaForCausalLM(config).eval()


def test_a_random_llama_imports_with_its_logits_and_converts_to_v2_keeping_them():
    net = random_llama()
    model = hf.from_hf(net)
    assert model.config.attention == "baseline" and not model.config.tie_embeddings
    gap = hf.logit_gap(model, net, tokens())
    assert gap["max_abs_logit"] > 0.3 and gap["max_abs_logit_gap"] <= TOLERANCE, gap
    v2 = to_diff_v2(model)  # lesson 13's converter, unchanged: the imported Llama is a baseline like any other
    assert step0_gap(model, v2, tokens())["max_abs_logit_gap"] <= TOLERANCE
    assert hf.logit_gap(v2, net, tokens())["max_abs_logit_gap"] <= TOLERANCE


@pytest.mark.parametrize("fields, phrase", [
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}, "no scaling"),
    ({"attention_bias": True}, "no biases"),
    ({"hidden_act": "gelu"}, "SiLU"),
])
def test_import_refuses_what_the_course_cannot_hold(fields, phrase):
    with pytest.raises(hf.ConfigError, match=phrase):
        hf.from_hf(random_llama(**fields))


def test_export_refuses_v2_and_a_constant_lambda_init():
    for fields, phrase in ((dict(attention="diff_v2"), "this model is diff_v2"),
                           (dict(attention="diff_v1", lambda_init=0.5), "constant lambda_init")):
        with pytest.raises(hf.ConfigError, match=phrase):
            hf.to_hf(course_model(**fields))


# ------------------------------------------------------------------------------------------------ the command


def test_export_import_convert_through_the_command(tmp_path):
    """Course V1 → DiffLlama folder → course V1; course baseline → Llama folder → course baseline → V2 (convert)."""
    for kind in ("diff_v1", "baseline"):
        exported, back = tmp_path / f"{kind}-hf", tmp_path / f"{kind}-back"
        code, out, _ = run_cli("convert", str(SHIPPED / kind), "--to", "hf", "--out", str(exported))
        assert code == 0 and "DiffLlamaForCausalLM" in out if kind == "diff_v1" else "LlamaForCausalLM" in out, out
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [], "a temporary folder was left"
        code, out, _ = run_cli("convert", str(exported), "--from-hf", "--out", str(back))
        assert code == 0 and f"course {kind} checkpoint" in out, out
        original, _ = load_model(SHIPPED / kind)
        model, record = load_model(back)
        assert record["imported_from"]["model_type"] == ("diffllama" if kind == "diff_v1" else "llama")
        gap = step0_gap(original, model, tokens(length=128))
        assert gap["max_abs_logit_gap"] <= hf.AGREEMENT * gap["max_abs_logit"], gap
    code, out, err = run_cli("convert", str(tmp_path / "baseline-back"), "--to", "diff_v2", "--out", str(tmp_path / "v2"))
    assert code == 0 and "largest |logit change| 0" in out, (out, err)


def bad_inputs(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """name: (arguments, a phrase the one-line error must contain)."""
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    not_hf = tmp_path / "not-hf"
    not_hf.mkdir()
    scaled = tmp_path / "scaled-llama"
    random_llama(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}).save_pretrained(scaled)
    return {
        "a V2 checkpoint": (["convert", str(SHIPPED / "diff_v2"), "--to", "hf"], "this model is diff_v2"),
        "an occupied output": (["convert", str(SHIPPED / "baseline"), "--to", "hf", "--out", str(occupied)],
                               "is not empty"),
        "a missing folder": (["convert", str(tmp_path / "nowhere"), "--from-hf"], "does not exist"),
        "a folder without a model": (["convert", str(not_hf), "--from-hf"], "not a readable transformers model"),
        "a scaled RoPE": (["convert", str(scaled), "--from-hf"], "no scaling"),
        "import and convert at once": (["convert", str(scaled), "--from-hf", "--to", "diff_v2"], "imports only"),
    }


def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path):
    for name, (args, phrase) in bad_inputs(tmp_path).items():
        before = sorted(tmp_path.rglob("*"))
        code, out, err = run_cli(*args, *([] if "--out" in args else ["--out", str(tmp_path / "out")]))
        assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: ") and phrase in err, (name, err)
        assert sorted(tmp_path.rglob("*")) == before, name
