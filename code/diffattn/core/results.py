"""outputs/numbers.json: every number a lesson quotes, keyed by lesson ("01" ... "13").

Writes are atomic (temp file + rename) and per lesson, so a crash in lesson 05 keeps what lessons 01-04 wrote.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from diffattn.core.errors import ConfigError
from diffattn.core.paths import outputs_dir

NUMBERS_FILE = "numbers.json"


def numbers_path(root: Path | None = None) -> Path:
    return (root or outputs_dir()) / NUMBERS_FILE


def load_numbers(path: Path | None = None) -> dict[str, Any]:
    path = path or numbers_path()
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def save_lesson_numbers(lesson: str, results: dict[str, Any], path: Path | None = None) -> Path:
    """Replace one lesson's entry in numbers.json, leaving the others untouched."""
    path = path or numbers_path()
    numbers = load_numbers(path)
    numbers[lesson] = results
    write_json_atomic(path, dict(sorted(numbers.items())))
    return path


def read_json(path: Path) -> Any:
    """A JSON file a user points a command at; unreadable or malformed, a one-line ConfigError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and a rename: a crash leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; outputs are meant to be read by everyone
        os.replace(tmp, path)
    except BaseException:  # a folder where the file goes, a full disk, an interrupt: no stray temporary file
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def lookup(numbers: dict[str, Any], key: str) -> Any:
    """'03.crossover.softmax' -> numbers['03']['crossover']['softmax']; list indexes are integers."""
    node: Any = numbers
    for part in key.split("."):
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(key)
    return node
