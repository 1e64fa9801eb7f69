"""The package's layers (CONTRIBUTING.md, "Layers"): every import inside code/diffattn, at module level or inside a
function, goes down the table or stays in its own layer, and no chain of imports comes back to where it started."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CODE = Path(__file__).resolve().parents[1] / "code"

# The one layer table (CONTRIBUTING.md, "Layers", shows it; test_contributing_shows_this_table checks the copy).
# layer: (its packages under diffattn/, the layers it may import besides itself, what it holds)
LAYERS = {
    "core": ({"core"}, set(), "errors, paths, names, numbers.json, statistics, progress, figures; the standard "
                              "library at import (numpy, scipy, matplotlib inside functions)"),
    "pure": ({"pure"}, {"core"}, "the stdlib track and the variant registry; `tests/test_pure_stdlib_only.py` blocks "
                                 "third-party imports"),
    "config": ({"config"}, {"core", "pure"}, "GPTConfig, TrainConfig, presets; no torch"),
    "nn": ({"nn"}, {"core", "pure"}, "the torch track's attention modules, kernels, cache and CPU controls"),
    "model": ({"model"}, {"core", "pure", "config", "nn"}, "the GPT and decoding"),
    "data": ({"data"}, {"core"}, "the training tasks and their nulls"),
    "training": ({"training"}, {"core", "pure", "config", "nn", "model", "data"},
                 "the loop, checkpoints, comparisons, the declared study runs, shipped models, the warm start"),
    "evaluation": ({"eval", "perf"}, {"core", "pure", "config", "nn", "model", "data", "training"},
                   "scores of trained models (`eval/`), timings and rooflines (`perf/`)"),
    "planning": ({"plan"}, {"core", "pure", "config"}, "lesson 13's planner; stdlib only"),
    "lessons": ({"lessons"}, {"core", "pure", "config", "nn", "model", "data", "training", "evaluation", "planning"},
                "one module per lesson, and the numbers quoted in the lessons' text"),
    "grading": ({"grading"}, {"core"}, "the grader and the exercise rubric; it trusts nothing above it"),
    "cli": ({"cli", "__main__"}, {"core", "pure", "config", "nn", "model", "data", "training", "evaluation",
                                  "planning", "lessons", "grading"}, "one module per command"),
}
TOP_LEVEL = {"__init__", "__main__", "config"}  # every other module lives in its layer's package


def markdown_table() -> list[str]:
    rows = ["| layer | packages (under `code/diffattn/`) | may import | holds |", "|---|---|---|---|"]
    for name, (packages, allowed, holds) in LAYERS.items():
        shown = ", ".join(f"`{p}`" if p in TOP_LEVEL else f"`{p}/`" for p in sorted(packages))
        rows.append(f"| {name} | {shown} | {', '.join(a for a in LAYERS if a in allowed) or '-'} | {holds} |")
    return rows


def module_name(path: Path) -> str:
    parts = path.relative_to(CODE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = CODE.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(path: Path) -> set[str]:
    """Every diffattn module `path` imports, anywhere in the file; `from diffattn.x import y` counts y when y is a
    module, else diffattn.x."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("diffattn.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("diffattn"):
            named = {f"{node.module}.{a.name}" for a in node.names if is_module(f"{node.module}.{a.name}")}
            found |= named or ({node.module} if node.module != "diffattn" else set())
    return found


def layer(module: str) -> str:
    first = module.split(".")[1] if "." in module else module
    owners = [name for name, (members, _, _) in LAYERS.items() if first in members]
    assert owners, f"{module} belongs to no layer: add {first!r} to LAYERS and to the table in CONTRIBUTING.md"
    return owners[0]


GRAPH = {module_name(p): imports(p) - {module_name(p)} for p in sorted((CODE / "diffattn").rglob("*.py"))}


def test_every_import_goes_down_the_table():
    wrong = []
    for module, deps in GRAPH.items():
        if module == "diffattn":
            continue
        mine = layer(module)
        allowed = LAYERS[mine][1] | {mine}
        wrong += [f"{module} ({mine}) imports {dep} ({layer(dep)})" for dep in sorted(deps) if layer(dep) not in allowed]
    assert not wrong, "imports against the layer table:\n" + "\n".join(wrong)


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (modules in order, the first repeated at the end), or [] if there is none."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = "open"
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        state[node] = "done"
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_no_import_cycles():
    found = cycle({m: {d for d in deps if d != "diffattn"} for m, deps in GRAPH.items() if m != "diffattn"})
    assert not found, "import cycle: " + " -> ".join(found)


def test_the_checks_see_a_wrong_edge_and_a_cycle():
    """Guards the two tests above against checking nothing."""
    assert layer("diffattn.pure.snr") == "pure" and layer("diffattn.lessons.lesson01_noise_floor") == "lessons"
    assert "lessons" not in {layer(d) for d in GRAPH["diffattn.training.loop"]}
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) == []
    assert "diffattn.nn.kernels" in GRAPH["diffattn.nn.attention"]  # function-level imports are seen too:
    assert "diffattn.training.runs" in GRAPH["diffattn.eval.kinds"]  # eval.kinds imports runs inside a function


@pytest.mark.parametrize("path", sorted((CODE / "diffattn").rglob("*.py")), ids=lambda p: module_name(p))
def test_no_module_over_400_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= 400, f"{module_name(path)} has {lines} lines: split it by job (CONTRIBUTING.md, Layers)"


def test_contributing_shows_this_table():
    text = (CODE.parent / "CONTRIBUTING.md").read_text()
    assert "\n".join(markdown_table()) in text, "CONTRIBUTING.md's layer table differs from tests/test_layers.py's " \
        "LAYERS; paste:\n" + "\n".join(markdown_table())


def test_the_package_is_its_layers():
    """Only TOP_LEVEL modules sit beside the packages, and no two modules share a name."""
    top = {p.stem for p in (CODE / "diffattn").glob("*.py")}
    assert top <= TOP_LEVEL, f"modules outside a layer's package: {sorted(top - TOP_LEVEL)}"
    stems = [p.stem for p in (CODE / "diffattn").rglob("*.py") if p.stem != "__init__"]
    stems.remove("attention")  # pure/attention.py and nn/attention.py: the stdlib math and its torch mirror
    assert len(stems) == len(set(stems)), f"repeated module names: {sorted({s for s in stems if stems.count(s) > 1})}"
