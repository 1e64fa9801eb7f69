#!/usr/bin/env bash
# Build autograder.zip for Gradescope from this checkout: `bash tests/grading/gradescope/make_autograder.sh [HIDDEN_DIR]`
# (or `make gradescope-zip HIDDEN=dir`). The zip holds the committed repository (no .git, no figures), hidden tests
# in hidden_tests/, MANIFEST.sha256 of the grading files, and setup.sh and run_autograder at its root.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
hidden=${1:-}
stage=$(mktemp -d)
git -C "$root" archive --format=tar HEAD | tar -x -C "$stage"
rm -rf "$stage/outputs/figures"
if [ -n "$hidden" ]; then
    mkdir -p "$stage/hidden_tests"
    cp -R "$hidden"/. "$stage/hidden_tests/"
fi
PYTHONPATH="$stage/code" python3 -m diffattn.grading.manifest "$stage"
cp "$root/tests/grading/gradescope/setup.sh" "$root/tests/grading/gradescope/run_autograder" "$stage/"
# Gradescope unpacks the zip into /autograder/source; setup.sh and run_autograder must sit at its root.
rm -f "$root/autograder.zip"
(cd "$stage" && zip -qr "$root/autograder.zip" .)
rm -rf "$stage"
echo "wrote $root/autograder.zip"
