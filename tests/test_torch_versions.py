"""The course's GPU checks run on torch 2.11, CI on a newer one: nothing the course calls may be
newer than 2.11. Every `torch.…` name the package uses (found in its source, aliases such as `F` and `nn`
followed) must be listed in tests/torch_2_11_names.txt, a file written under torch 2.11.0 by

    python tests/test_torch_versions.py --write      (refuses to write under any other torch)

which keeps only names that resolve there. A new API therefore fails this test until someone has checked it under
2.11. Each session that changes the list also runs `bash scripts/gpu_check.sh --cpu` under torch 2.11 (README, "GPU
track"), which covers what names cannot: keyword arguments and behaviour."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LISTED = ROOT / "tests" / "torch_2_11_names.txt"
GPU_TORCH = "2.11"


def aliases(tree: ast.Module) -> dict[str, str]:
    """Local name → dotted torch path, from `import torch…` and `from torch… import …` anywhere in the file."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "torch":
                    found[a.asname or a.name.split(".")[0]] = a.name if a.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and node.level == 0:
            for a in node.names:
                found[a.asname or a.name] = f"{node.module}.{a.name}"
    return found


def dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def used_torch_names() -> set[str]:
    """Every torch name the package reaches: the imports themselves and each attribute chain on an imported name."""
    names = set()
    for path in (ROOT / "code" / "diffattn").rglob("*.py"):
        tree = ast.parse(path.read_text())
        local = aliases(tree)
        names |= {full for full in local.values() if full != "torch"}
        for node in ast.walk(tree):
            chain = dotted(node) if isinstance(node, ast.Attribute) else None
            if chain and chain[0] in local:
                names.add(".".join([local[chain[0]], *chain[1:]]))
    # only the longest chains: torch.nn.functional.silu implies torch.nn and torch.nn.functional
    return {n for n in names if not any(other.startswith(n + ".") for other in names)}


def resolves(name: str) -> bool:
    """Does torch.a.b.c exist here: a module, or an attribute of the longest importable prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                target = getattr(target, attribute)
        except AttributeError:
            return False
        return True
    return False


def test_every_torch_name_the_course_uses_exists_in_the_gpu_machines_torch():
    listed = set(LISTED.read_text().split())
    new = sorted(used_torch_names() - listed)
    assert not new, (f"not checked under torch {GPU_TORCH} (the GPU machine's): {new}; run `python "
                     f"tests/test_torch_versions.py --write` under torch {GPU_TORCH}")
    stale = sorted(listed - used_torch_names())
    assert not stale, f"listed but no longer used: {stale}; rewrite the list (see the module docstring)"


def test_the_scan_finds_aliases_and_attribute_chains():
    tree = ast.parse("import torch\nfrom torch.nn import functional as F\nfrom torch import nn\n"
                     "def f(x):\n    return F.silu(nn.Linear(2, 2)(x)) + torch.compiler.is_compiling()\n")
    local = aliases(tree)
    assert local == {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn"}
    chains = {".".join(dotted(n)) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert {"F.silu", "nn.Linear", "torch.compiler.is_compiling"} <= chains
    assert resolves("torch.nn.functional.silu") and not resolves("torch.nn.functional.no_such_function")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import torch

    if not torch.__version__.startswith(GPU_TORCH + "."):
        sys.exit(f"run this under torch {GPU_TORCH} (this is {torch.__version__})")
    used = sorted(used_torch_names())
    missing = [n for n in used if not resolves(n)]
    if missing:
        sys.exit(f"not in torch {torch.__version__}: {missing}")
    LISTED.write_text("\n".join(used) + "\n")
    print(f"{len(used)} names, all present in torch {torch.__version__}: {LISTED}")
