"""Every notebook is committed without outputs and runs top to bottom on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diffattn import lessons as experiments
from tests.conftest import HAS_TORCH

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
STDLIB = {n for n in experiments.LESSONS if not experiments.REQUIRES.get(n)}  # read from the lessons


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path: Path):
    cells = json.loads(path.read_text())["cells"]
    stale = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not stale, f"{path.name}: cells {stale} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_names_its_lesson(path: Path):
    number = path.name[:2]
    lessons = list((ROOT / "lessons").glob(f"{number}-*.md"))
    assert lessons, f"{path.name}: no lessons/{number}-*.md"
    assert f"lessons/{lessons[0].name}" in path.read_text(), f"{path.name} should link to its lesson {lessons[0].name}"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path):
    if path.name[:2] not in STDLIB and not HAS_TORCH:
        pytest.skip("PyTorch notebook")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
