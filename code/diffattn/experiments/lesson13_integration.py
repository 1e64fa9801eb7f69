"""Lesson 13: Integrating DIFF into your model.

Computes every number the lesson quotes (diffattn.experiments: run, report, figures).
"""

from __future__ import annotations

from pathlib import Path

TITLE = 'Integrating DIFF into your model'


def run(progress: bool = True) -> dict:
    return {}


def report(results: dict) -> str:
    return f"Lesson 13 · {TITLE}"


def figures(results: dict, outdir: Path) -> list[Path]:
    return []
