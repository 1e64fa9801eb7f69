"""The grader's trees: the files a child grades with, read once and checked against MANIFEST.sha256; the snapshot
that puts the checkout back as it was; the layout of a child's private grading tree (diffattn.grading.grader)."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

MANIFEST = "MANIFEST.sha256"
SNAPSHOT_LIMIT = 8 << 20  # checkout files larger than this (data, say) are not snapshotted
KEEP_LIMIT = 64 << 20  # bytes of changed checkout files kept aside when the checkout is restored
UNWATCHED = {".git", ".venv", "venv", "__pycache__", ".pytest_cache", ".hypothesis", "mutants", ".ipynb_checkpoints"}
# Folders the course's own runs keep writing while grading runs (training and rehearsal outputs, all git-ignored):
# "restoring" them would roll a background run's metrics back, and no grade reads them.
UNWATCHED_PATHS = {"outputs/checkpoints", "outputs/gpu/rehearsal", "runs", "build"}
EDITOR_FILES = re.compile(r"(\.sw[a-p]|~|\.DS_Store)$|(^|/)\.#")  # an editor's swap files come and go while grading


def files_under(folder: Path, pattern: str) -> list[Path]:
    return sorted(p for p in folder.rglob(pattern) if p.is_file() and not UNWATCHED & set(p.parts))


def pristine_files(root: Path) -> dict[str, bytes]:
    """What a child needs, read once: the package (reference and grader), the tests, the root plugin, the config."""
    paths = files_under(root / "code" / "diffattn", "*.py") + files_under(root / "tests", "*.py")
    paths += [root / "conftest.py", root / "pyproject.toml"]
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in paths}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_text(files: dict[str, bytes]) -> str:
    """MANIFEST.sha256 in `sha256sum` format, so `sha256sum -c MANIFEST.sha256` checks it too."""
    return "".join(f"{sha256(data)}  {path}\n" for path, data in sorted(files.items()))


def manifest_problems(root: Path, files: dict[str, bytes]) -> dict[str, str]:
    """{path: problem} for grading files that differ from MANIFEST.sha256; empty when there is no manifest."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        return {}
    expected = dict(reversed(line.split("  ", 1)) for line in manifest.read_text().splitlines() if line)
    problems = {p: f"{p} is not in {MANIFEST} (added after the handout was built?)" for p in files if p not in expected}
    for path, digest in expected.items():
        if path not in files:
            problems[path] = f"{path} is missing (listed in {MANIFEST})"
        elif sha256(files[path]) != digest:
            problems[path] = f"{path} differs from {MANIFEST} (restore it: the grader does not trust edited tests)"
    return problems


def snapshot(root: Path, skip: set[Path]) -> dict[str, bytes]:
    """Every file of the checkout outside UNWATCHED folders and under SNAPSHOT_LIMIT, as bytes (a few MB).

    The walk never enters an UNWATCHED folder (a .venv alone holds tens of thousands of files: walking it took most
    of a grading run) or UNWATCHED_PATHS folder, nor follows a link to a folder."""
    found = {}
    for folder, subfolders, names in os.walk(root):
        here = Path(folder).relative_to(root)
        subfolders[:] = [name for name in subfolders
                         if name not in UNWATCHED and (here / name).as_posix() not in UNWATCHED_PATHS]
        for name in names:
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            if (path.is_file() and not path.is_symlink() and not EDITOR_FILES.search(relative)
                    and path.resolve() not in skip and path.stat().st_size <= SNAPSHOT_LIMIT):
                found[relative] = path.read_bytes()
    return found


def restore(root: Path, before: dict[str, bytes], skip: set[Path]) -> tuple[list[str], Path | None]:
    """Put the checkout back as `before` had it; returns the paths that had changed and the folder that keeps their
    changed versions (None when nothing changed). A person who saved a file while grading ran loses nothing: the
    grader cannot tell their edit from a submission's, so it restores both and keeps both, outside the checkout."""
    after = snapshot(root, skip)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    kept = Path(tempfile.mkdtemp(prefix="diffattn-grade-changed-")) if changed else None
    budget = KEEP_LIMIT
    for path in changed:
        if kept is not None and path in after and len(after[path]) <= budget:
            budget -= len(after[path])
            (kept / path).parent.mkdir(parents=True, exist_ok=True)
            (kept / path).write_bytes(after[path])
        target = root / path
        if path in before:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(before[path])
        else:
            target.unlink()
    return changed, kept


def tree_changes(tree: Path, files: dict[str, bytes]) -> list[str]:
    """Files of the grading tree (package, tests) the child changed, removed or added."""
    now = {p.relative_to(tree).as_posix(): p for p in files_under(tree / "code", "*") + files_under(tree / "tests", "*")}
    changed = [path for path, data in files.items() if path not in now and path.startswith(("code/", "tests/"))]
    changed += [path for path, p in now.items() if files.get(path) != p.read_bytes()]
    changed += [path for path in ("conftest.py", "pyproject.toml")
                if not (tree / path).is_file() or (tree / path).read_bytes() != files[path]]
    return sorted(changed)


def lay_out(tree: Path, files: dict[str, bytes], submission: dict[str, bytes], hidden: dict[str, bytes]) -> None:
    for path, data in {**files, **hidden}.items():
        target = tree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (tree / "exercises").mkdir(exist_ok=True)
    for name, data in submission.items():
        (tree / "exercises" / name).write_bytes(data)


def hidden_files(folders: list[Path]) -> dict[str, bytes]:
    """Each --tests folder becomes the package tests/hidden_<k>/ (so tests/conftest.py's fixtures reach it)."""
    files = {}
    for k, folder in enumerate(folders):
        files[f"tests/hidden_{k}/__init__.py"] = b""
        for path in files_under(folder, "*.py"):
            files[f"tests/hidden_{k}/{path.relative_to(folder).as_posix()}"] = path.read_bytes()
    return files
