"""The mechanism diagrams (diffattn.lessons.diagrams): each draws from the code's declarations, the committed one in
outputs/figures/ is the one the code draws now, and its lesson shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from diffattn.lessons import diagrams  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def pixels(path: Path):
    import matplotlib.image

    return matplotlib.image.imread(path)


@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_the_committed_diagram_is_what_the_code_draws(name, tmp_path):
    fresh = diagrams.DIAGRAMS[name](tmp_path / name)
    committed = ROOT / "outputs" / "figures" / name
    assert committed.is_file(), f"outputs/figures/{name} is missing: run `make course`"
    drawn_with = json.loads((ROOT / "outputs" / "figures" / diagrams.RENDERER).read_text())
    if drawn_with != diagrams.renderer():  # another FreeType moves glyphs by a pixel: compare under the same one only
        pytest.skip(f"committed diagrams were drawn with {drawn_with}, this machine has {diagrams.renderer()}")
    a, b = pixels(fresh), pixels(committed)
    assert a.shape == b.shape, f"{name}: the committed diagram is stale (another size): run `make course`"
    changed = (abs(a - b).max(axis=-1) > 0.1).mean()
    assert changed < 0.005, f"{name}: {changed:.1%} of its pixels differ from what the code draws: run `make course`"


@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_its_lesson_shows_the_diagram(name):
    lesson = next((ROOT / "lessons").glob(f"{name[:2]}-*.md"))
    assert f"../outputs/figures/{name}" in lesson.read_text(), f"{lesson.name} does not show {name}"


def test_a_diagram_follows_the_registry(tmp_path):
    """A variant registered for a moment gets its own row in the KV-cache diagram: the picture is drawn from the
    declarations, not by hand."""
    from diffattn.pure import variants

    plain = pixels(diagrams.kv_cache(tmp_path / "plain.png"))
    with variants.registered(variants.VariantSpec("baseline_2kv", "2× KV heads", kind="baseline", kv_factor=2)):
        more = pixels(diagrams.kv_cache(tmp_path / "more.png"))
    assert more.shape[0] > plain.shape[0]
