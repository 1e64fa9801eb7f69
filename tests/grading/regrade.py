"""Grade several implementations in one process: `python -m tests.grading.regrade JOBS.json`.

JOBS.json is a list of {"impl": ..., "marker": ..., "files": [...], "out": ...}; each job is one
`pytest -m MARKER --impl=IMPL --results-json=OUT FILES` run. tests/test_graders_reject_wrong.py uses this to grade
every known-wrong implementation without paying for a fresh interpreter (and a torch import) per implementation.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest


def main(jobs_file: str) -> int:
    for job in json.loads(Path(jobs_file).read_text()):
        with contextlib.redirect_stdout(io.StringIO()):
            pytest.main(["-q", "-p", "no:cacheprovider", "-m", job["marker"], f"--impl={job['impl']}",
                         f"--results-json={job['out']}", *job["files"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
