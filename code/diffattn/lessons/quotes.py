"""Keep the numbers quoted in lessons/*.md equal to outputs/numbers.json.

Two markers, both invisible when the markdown is rendered:

1. A number followed by a tag quotes one value:   `0.853<!--n 01.irrelevant_mass.131072-->`
   The text's own form fixes the format: decimals, thousands commas, a unit suffix (% → ×100, k → /1e3, M → /1e6,
   B → /1e9, KiB/MiB/GiB → /1024ⁿ, × is a plain ratio). `check` compares; `sync` rewrites the number in place.
   The key's kind (numberkinds) decides what the text may say: an Exact or Stable number quotes its value (a Stable
   one only with digits that survive its tolerance); a Bound number quotes its bound ("below 1e-05<!--n …-->").
2. A command's output block:  a line `<!-- output: lesson 03 -->` followed by a ```text fence holding what
   `diffattn lesson 03` prints. For `lesson NN` it is rebuilt from numbers.json by that lesson's report().
3. Code shown from the source: a line `<!-- source: code/diffattn/pure/softmax.py:softmax -->` (a function, a class or
   `Class.method`; add ` nodoc` to leave its docstring out) followed by a ```python fence holding exactly that
   definition, so the code a lesson shows is the code that runs.
"""

from __future__ import annotations

import ast
import difflib
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from diffattn.core.errors import ConfigError
from diffattn.core.numberkinds import Kind, kind_of, quoted_text
from diffattn.core.results import lookup

# kinds_for("07") -> that lesson's NUMBER_KINDS (patterns → kinds); lessons without one are all Exact
KindsFor = Callable[[str], "dict[str, Kind]"]

NUMBER_TAG = re.compile(
    r"(?P<num>[-−]?\d[\d,]*(?:\.\d+)?(?:e[-+]\d+)?)(?P<space> ?)(?P<unit>%|×|k|M|B|KiB|MiB|GiB)?<!--n (?P<key>\d\d\.[\w.\-]+)-->"
)
OUTPUT_BLOCK = re.compile(r"<!-- output: (?P<args>[^>]+?) -->\n```text\n(?P<body>.*?)```", re.DOTALL)
SOURCE_BLOCK = re.compile(r"<!-- source: (?P<path>[\w./-]+\.py):(?P<name>[\w.]+)(?P<nodoc> nodoc)? -->\n```python\n"
                          r"(?P<body>.*?)```", re.DOTALL)
CHECKOUT = Path(__file__).resolve().parents[3]  # the code shown is this package's own, wherever outputs/ live
SCALE = {"%": 100.0, "k": 1e-3, "M": 1e-6, "B": 1e-9, "KiB": 2.0**-10, "MiB": 2.0**-20, "GiB": 2.0**-30}


@dataclass
class Mismatch:
    path: Path
    line: int
    what: str
    found: str
    expected: str

    note: str = ""

    def __str__(self) -> str:
        if self.note:
            return f"{self.path.name}:{self.line}: {self.what}: {self.note}"
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


def _no_kinds(lesson: str) -> dict:
    return {}


def expected_number(m: re.Match, numbers: dict[str, Any], kinds_for: KindsFor) -> tuple[str, str | None]:
    """What tag `m` must read as, and a complaint when its form is wrong for the number's kind."""
    lesson, _, inner = m["key"].partition(".")
    kind = kind_of(kinds_for(lesson), inner)
    value = lookup(numbers, m["key"])
    return quoted_text(kind, m["num"], value, lambda v: format_like(m["num"], m["unit"] or "", v))


def block_diff(found: str, expected: str, args: str, limit: int = 12) -> str:
    """A short unified diff: what the lesson shows vs what `diffattn <args>` prints now."""
    lines = list(difflib.unified_diff(found.rstrip("\n").splitlines(), expected.rstrip("\n").splitlines(),
                                      "lesson text", f"diffattn {args}", n=0, lineterm=""))
    more = [f"... ({len(lines) - limit} more diff lines)"] if len(lines) > limit else []
    return "\n".join(lines[:limit] + more)


def source_of(path: str, name: str, docstring: bool = True) -> str:
    """The definition of `name` (a function, a class, or Class.method) in the repository file `path`, dedented, with
    its decorators; without its docstring when `docstring` is False. ConfigError when either is not there."""
    file = CHECKOUT / path
    if not file.is_file():
        raise ConfigError(f"source block: no file {path}")
    text = file.read_text()
    nodes: list[ast.AST] = [ast.parse(text)]
    for part in name.split("."):
        found = [n for n in ast.iter_child_nodes(nodes[-1]) if getattr(n, "name", None) == part
                 and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        if not found:
            raise ConfigError(f"source block: {path} defines no {name}")
        nodes.append(found[0])
    node, lines = nodes[-1], text.splitlines()
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    keep = list(range(first - 1, node.end_lineno))
    doc = node.body[0] if node.body and isinstance(node.body[0], ast.Expr) and isinstance(
        getattr(node.body[0], "value", None), ast.Constant) and isinstance(node.body[0].value.value, str) else None
    if doc is not None and not docstring:
        keep = [i for i in keep if not doc.lineno - 1 <= i < doc.end_lineno]
    return textwrap.dedent("\n".join(lines[i] for i in keep)) + "\n"


def check_text(path: Path, source: str, numbers: dict[str, Any], render_output: Callable[[str], str],
               kinds_for: KindsFor = _no_kinds) -> list[Mismatch]:
    problems: list[Mismatch] = []
    for m in NUMBER_TAG.finditer(source):
        line = _line_of(source, m.start())
        try:
            expected, complaint = expected_number(m, numbers, kinds_for)
        except (KeyError, IndexError, ValueError):
            problems.append(Mismatch(path, line, m["key"], m["num"], "<missing key>"))
            continue
        if complaint:
            problems.append(Mismatch(path, line, m["key"], m["num"], expected, note=f"text says {m['num']!r}, {complaint}"))
        elif expected != m["num"]:
            problems.append(Mismatch(path, line, m["key"], m["num"], expected))
    for m in OUTPUT_BLOCK.finditer(source):
        expected = render_output(m["args"])
        if expected.rstrip("\n") != m["body"].rstrip("\n"):
            problems.append(Mismatch(path, _line_of(source, m.start()), f"output of `{m['args']}`", "<block>",
                                     "<differs>", note="the block differs from what the command prints:\n"
                                     + block_diff(m["body"], expected, m["args"])))
    for m in SOURCE_BLOCK.finditer(source):
        try:
            expected = source_of(m["path"], m["name"], docstring=not m["nodoc"])
        except ConfigError as exc:  # the file or the definition is gone: say so, and check the rest of the file
            problems.append(Mismatch(path, _line_of(source, m.start()), f"source of {m['path']}:{m['name']}",
                                     "<block>", "<missing>", note=str(exc)))
            continue
        if expected != m["body"]:
            problems.append(Mismatch(path, _line_of(source, m.start()), f"source of {m['path']}:{m['name']}",
                                     "<block>", "<differs>", note="the code shown differs from the source; "
                                     "`make lessons-sync` copies it"))
    return problems


def sync_text(source: str, numbers: dict[str, Any], render_output: Callable[[str], str],
              kinds_for: KindsFor = _no_kinds) -> str:
    def number(m: re.Match) -> str:
        expected, _ = expected_number(m, numbers, kinds_for)
        return f"{expected}{m['space']}{m['unit'] or ''}<!--n {m['key']}-->"

    def block(m: re.Match) -> str:
        return f"<!-- output: {m['args']} -->\n```text\n{render_output(m['args']).rstrip(chr(10))}\n```"

    def code(m: re.Match) -> str:
        return (f"<!-- source: {m['path']}:{m['name']}{m['nodoc'] or ''} -->\n```python\n"
                f"{source_of(m['path'], m['name'], docstring=not m['nodoc'])}```")

    return SOURCE_BLOCK.sub(code, OUTPUT_BLOCK.sub(block, NUMBER_TAG.sub(number, source)))


def tagged_keys(source: str) -> list[str]:
    """Every key a lesson quotes (used by tests to make sure lessons quote what they claim)."""
    return [m["key"] for m in NUMBER_TAG.finditer(source)]
