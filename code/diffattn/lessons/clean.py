"""The text a reader opens is clean; its tagged source is what the checks read.

Every number a lesson quotes carries a tag naming its key (`0.853<!--n 01.irrelevant_mass.131072-->`), and every output
block and code block shown from the source carries a marker line (diffattn.lessons.quotes). Rendered, those are
invisible; in an editor, a terminal or a notebook's side panel they clutter every number. So the tagged files live under
`lessons/src/` and `docs/src/`, and `lessons/` and `docs/` hold the same text with the tags and markers taken out:
`diffattn lessons sync` writes them, `diffattn lessons check` (and the tests) fail while one is stale.

    lessons/src/09-retrieval-allocation.md  →  lessons/09-retrieval-allocation.md
    lessons/src/notes/09.md                 →  lessons/notes/09.md
    docs/src/benchmarks.md                  →  docs/benchmarks.md

Links in a source are written as the rendered file sees them (relative to lessons/ or docs/).
"""

from __future__ import annotations

import re
from pathlib import Path

from diffattn.core.paths import repo_root
from diffattn.lessons.quotes import NUMBER_TAG

TREES = ("lessons", "docs")  # each <tree>/src/**.md is rendered to <tree>/**.md
MARKER_LINE = re.compile(r"^<!-- (?:output|source): [^\n]*-->\n", re.M)


def clean(text: str) -> str:
    """`text` without its number tags and its output/source marker lines; every number and fence stays."""
    text = NUMBER_TAG.sub(lambda m: f"{m['num']}{m['space']}{m['unit'] or ''}", text)
    return MARKER_LINE.sub("", text)


def sources(root: Path | None = None) -> list[Path]:
    """Every tagged source file, in a stable order."""
    root = root or repo_root()
    return [p for tree in TREES for p in sorted((root / tree / "src").rglob("*.md"))]


def rendered(source: Path) -> Path:
    """Where `source` (…/<tree>/src/x.md) is rendered: …/<tree>/x.md."""
    parts = source.parts
    i = max(i for i, part in enumerate(parts) if part == "src")
    return Path(*parts[:i], *parts[i + 1:])


def stale(root: Path | None = None) -> list[str]:
    """One line per rendered file that is missing, differs from its cleaned source, or has no source."""
    root = root or repo_root()
    found = []
    for source in sources(root):
        target, name = rendered(source), source.relative_to(root).as_posix()
        if not target.is_file() or target.read_text(encoding="utf-8") != clean(source.read_text(encoding="utf-8")):
            found.append(f"{target.relative_to(root).as_posix()} is not the clean text of {name}: edit {name} (an edit "
                         f"of the clean copy is overwritten), then `make lessons-sync`")
    made = {rendered(p) for p in sources(root)}
    found += [f"{p.relative_to(root).as_posix()} has no tagged source under src/: move it there"
              for tree in TREES for p in sorted((root / tree).rglob("*.md"))
              if "src" not in p.relative_to(root / tree).parts and p not in made]
    return found


def render_all(root: Path | None = None) -> list[Path]:
    """Write every stale rendering; returns what it wrote."""
    written = []
    for source in sources(root):
        target, text = rendered(source), clean(source.read_text(encoding="utf-8"))
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written
