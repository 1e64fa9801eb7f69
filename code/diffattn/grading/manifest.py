"""Write MANIFEST.sha256 for a grading tree: `python -m diffattn.grading.manifest DIR` (make gradescope-zip, handout).

The manifest lists the sha256 of every file the grader runs with (tree.pristine_files: the package, the tests and
adapters, the root plugin, pytest's configuration). `diffattn grade` checks it before grading and scores
0 the exercises whose tests differ from it; `sha256sum -c MANIFEST.sha256` checks it by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

from diffattn.grading.tree import MANIFEST, manifest_text, pristine_files


def write_manifest(root: Path) -> Path:
    target = root / MANIFEST
    target.write_text(manifest_text(pristine_files(root)))
    return target


if __name__ == "__main__":
    print(f"wrote {write_manifest(Path(sys.argv[1]))}")
