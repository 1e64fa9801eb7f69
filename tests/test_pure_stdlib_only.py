"""diffattn.pure (the stdlib track) must import and run with every third-party module blocked."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOCKER = r"""
import sys, importlib.abc

class BlockThirdParty(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top == "diffattn":
            return None
        raise ImportError(f"third-party import blocked in the stdlib track: {name}")

sys.meta_path.insert(0, BlockThirdParty())
"""

PROGRAM = BLOCKER + r"""
import importlib, pkgutil
import diffattn.pure as pure
for info in pkgutil.iter_modules(pure.__path__):
    importlib.import_module(f"diffattn.pure.{info.name}")
from diffattn import cli
from diffattn import lessons as experiments
stdlib = [n for n in experiments.LESSONS if not experiments.REQUIRES.get(n)]
assert stdlib == ["01", "02", "03", "04", "12"], stdlib  # 12 reads committed bench runs and derives the rest
for number in stdlib:
    experiments.load(number)
w = pure.diff_weights_v1([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]], 0.5)
assert abs(sum(w[0]) - 0.5) < 1e-12
try:
    import numpy
except ImportError:
    pass
else:
    raise SystemExit("the blocker let numpy through")
print("ok")
"""


def test_pure_track_imports_with_third_party_blocked():
    run = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, env={"PYTHONPATH": str(ROOT / "code")},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_torch_lessons_say_what_they_need_without_a_traceback():
    program = BLOCKER + "from diffattn.cli import main; raise SystemExit(main(['lesson', '05']))"
    run = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env={"PYTHONPATH": str(ROOT / "code")},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip() == "error: lesson 05 needs torch: run `make course` (installs it)"


def test_stdlib_cli_runs_with_third_party_blocked():
    program = BLOCKER + "from diffattn.cli import main; raise SystemExit(main(['lesson', '02']))"
    run = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env={"PYTHONPATH": str(ROOT / "code")},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
