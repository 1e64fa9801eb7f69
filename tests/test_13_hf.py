"""Lesson 13, dev-only: the course's models in and out of Hugging Face transformers (diffattn.warmstart.hf).

Skipped wherever transformers is not installed (a dev-only extra, never a dependency of diffattn); the command's
one-line error without it is tested in tests/test_13_convert.py, which always runs.

Two kinds of agreement are checked. The mapping: in fp64, with transformers' RoPE cos/sin replaced by the course's
(transformers forms the angles p·θ_i in fp32, the course in fp64 rounded once), the logits agree to 1e-6 for every
layout and setting the export folds in (not to fp64 rounding: transformers' Llama RMSNorm computes in fp32 whatever the
model's dtype); each near-miss mapping misses by more than 1e-3.
As shipped: plain transformers models in fp32 agree within fp32 rounding, max |Δ logit| ≤ 1e-5 on tiny random
models; on the trained checkpoints the fp32 angles of transformers' RoPE make the gap grow with position, so there it
is bounded relative to the logits.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from diffattn import cli  # noqa: E402
from diffattn.checkpoint import load_model  # noqa: E402
from diffattn.config import GPTConfig  # noqa: E402
from diffattn.model import GPT  # noqa: E402
from diffattn.nn.rope import rope_cos_sin  # noqa: E402
from diffattn.warmstart import hf  # noqa: E402
from diffattn.warmstart.convert import step0_gap, to_diff_v2  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "outputs" / "models" / "cpu-tiny" / "text"
MAPPING = 1e-6  # fp64, the same RoPE numbers: what is left is transformers' RMSNorm rounding to fp32
TOLERANCE = 1e-5  # fp32, the figure to reach
RELATIVE = 1e-5  # fp32 on trained checkpoints at 128 positions: of the largest |logit|

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


class CourseRope(torch.nn.Module):
    """transformers' rotary embedding with the course's cos/sin (fp64 angles, rounded once) in rotate-half layout."""

    def __init__(self, config):
        super().__init__()
        self.head_dim, self.base = config.head_dim, config.rope_parameters["rope_theta"]

    def forward(self, x, position_ids):
        cos, sin = rope_cos_sin((0, position_ids.shape[-1]), self.head_dim, base=self.base, dtype=x.dtype)
        return torch.cat((cos, cos), -1)[None], torch.cat((sin, sin), -1)[None]


def mapping_gap(model: GPT, net) -> float:
    net.model.rotary_emb = CourseRope(net.config)
    return hf.logit_gap(model.double(), net.double(), tokens())["max_abs_logit_gap"]


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


# -------------------------------------------------------------------------------------------------- the mapping


@pytest.mark.parametrize("case", CASES)
def test_export_then_import_maps_every_weight(case):
    model = course_model(**CASES[case])
    net = hf.to_hf(model)
    assert type(net).__name__ == ("DiffLlamaForCausalLM" if model.config.attention == "diff_v1" else "LlamaForCausalLM")
    back = hf.from_hf(net)
    assert back.config.attention == model.config.attention
    assert mapping_gap(model, net) <= MAPPING
    assert mapping_gap(back, net) <= MAPPING


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
        assert mapping_gap(model, net) > 1e-3, name


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
def test_the_shipped_checkpoints_export_within_fp32_rounding(kind):
    model, _ = load_model(SHIPPED / kind)
    gap = hf.logit_gap(model, hf.to_hf(model), tokens(length=128, batch=4))
    assert gap["max_abs_logit"] > 1.0 and gap["max_abs_logit_gap"] <= RELATIVE * gap["max_abs_logit"], gap


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
        assert gap["max_abs_logit_gap"] <= RELATIVE * gap["max_abs_logit"], gap
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
