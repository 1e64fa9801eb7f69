#!/usr/bin/env bash
# Build autograder.zip for Gradescope from this checkout (run from the repository root).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
stage=$(mktemp -d)
git -C "$root" archive --format=tar HEAD | tar -x -C "$stage"
rm -rf "$stage/outputs/figures"
cp "$root/tests/grading/gradescope/setup.sh" "$root/tests/grading/gradescope/run_autograder" "$stage/"
# Gradescope unpacks the zip into /autograder/source; setup.sh and run_autograder must sit at its root.
(cd "$stage" && zip -qr "$root/autograder.zip" .)
rm -rf "$stage"
echo "wrote $root/autograder.zip"
