"""Keep the numbers quoted in lessons/*.md equal to outputs/numbers.json.

Two markers, both invisible when the markdown is rendered:

1. A number followed by a tag quotes one value:   `0.853<!--n 01.irrelevant_mass.131072-->`
   The text's own form fixes the format: decimals, thousands commas, a unit suffix (% → ×100, k → /1e3, M → /1e6,
   B → /1e9, KiB/MiB/GiB → /1024ⁿ, × is a plain ratio). `check` compares; `sync` rewrites the number in place.
2. A command's output block:  a line `<!-- output: lesson 03 -->` followed by a ```text fence holding what
   `python -m diffattn lesson 03` prints. For `lesson NN` it is rebuilt from numbers.json by that lesson's report().
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from diffattn.results import lookup

NUMBER_TAG = re.compile(
    r"(?P<num>[-−]?\d[\d,]*(?:\.\d+)?(?:e[-+]\d+)?)(?P<space> ?)(?P<unit>%|×|k|M|B|KiB|MiB|GiB)?<!--n (?P<key>\d\d\.[\w.\-]+)-->"
)
OUTPUT_BLOCK = re.compile(r"<!-- output: (?P<args>[^>]+?) -->\n```text\n(?P<body>.*?)```", re.DOTALL)
SCALE = {"%": 100.0, "k": 1e-3, "M": 1e-6, "B": 1e-9, "KiB": 2.0**-10, "MiB": 2.0**-20, "GiB": 2.0**-30}


@dataclass
class Mismatch:
    path: Path
    line: int
    what: str
    found: str
    expected: str

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}: {self.what}: text says {self.found!r}, outputs say {self.expected!r}"


def format_like(text: str, unit: str, value: float) -> str:
    """Format `value` the way `text` is written (same decimals, commas, sign character)."""
    mantissa = text.split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    scaled = float(value) * SCALE.get(unit, 1.0)
    if "e" in text:  # scientific, as Python writes it: 1.1e-15
        out = f"{scaled:.{decimals}e}"
    else:
        out = f"{scaled:,.{decimals}f}" if "," in text else f"{scaled:.{decimals}f}"
    if out.startswith("-") and text.startswith("−"):
        out = "−" + out[1:]
    if out in ("-0", "−0") or re.fullmatch(r"[-−]0\.0*", out):
        out = out[1:]
    return out


def _line_of(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1


def check_text(path: Path, source: str, numbers: dict[str, Any], render_output: Callable[[str], str]) -> list[Mismatch]:
    problems: list[Mismatch] = []
    for m in NUMBER_TAG.finditer(source):
        try:
            value = lookup(numbers, m["key"])
        except (KeyError, IndexError, ValueError):
            problems.append(Mismatch(path, _line_of(source, m.start()), m["key"], m["num"], "<missing key>"))
            continue
        expected = format_like(m["num"], m["unit"] or "", value)
        if expected != m["num"]:
            problems.append(Mismatch(path, _line_of(source, m.start()), m["key"], m["num"], expected))
    for m in OUTPUT_BLOCK.finditer(source):
        expected = render_output(m["args"])
        if expected.rstrip("\n") != m["body"].rstrip("\n"):
            problems.append(Mismatch(path, _line_of(source, m.start()), f"output of `{m['args']}`", "<block>", "<differs>"))
    return problems


def sync_text(source: str, numbers: dict[str, Any], render_output: Callable[[str], str]) -> str:
    def number(m: re.Match) -> str:
        expected = format_like(m["num"], m["unit"] or "", lookup(numbers, m["key"]))
        return f"{expected}{m['space']}{m['unit'] or ''}<!--n {m['key']}-->"

    def block(m: re.Match) -> str:
        return f"<!-- output: {m['args']} -->\n```text\n{render_output(m['args']).rstrip(chr(10))}\n```"

    return OUTPUT_BLOCK.sub(block, NUMBER_TAG.sub(number, source))


def tagged_keys(source: str) -> list[str]:
    """Every key a lesson quotes (used by tests to make sure lessons quote what they claim)."""
    return [m["key"] for m in NUMBER_TAG.finditer(source)]
