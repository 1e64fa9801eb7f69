#!/usr/bin/env bash
# Build autograder.zip for Gradescope from this checkout: `bash tests/grading/gradescope/make_autograder.sh [HIDDEN_DIR]`
# (or `make gradescope-zip [HIDDEN=dir] [EXERCISES="ex01 ex02"]`). The zip holds the committed repository (no .git,
# no figures), hidden tests in hidden_tests/, MANIFEST.sha256 of the grading files, and setup.sh and run_autograder at
# its root. EXERCISES (one assignment) is written into the zip's EXERCISES file: run_autograder then grades those
# exercises only, so a submission is counted out of their points, not the whole course's. AUTOGRADER_ZIP names
# another zip to write (default: autograder.zip at the checkout's root).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
hidden=${1:-}
zip_path=${AUTOGRADER_ZIP:-$root/autograder.zip}
case "$zip_path" in /*) ;; *) zip_path=$PWD/$zip_path ;; esac
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
git -C "$root" archive --format=tar HEAD | tar -x -C "$stage"
rm -rf "$stage/outputs/figures"
if [ -n "${EXERCISES:-}" ]; then  # checked against the committed exercises; an unknown one is one error line, exit 2
    # shellcheck disable=SC2086  # one word per exercise
    only=$(PYTHONPATH="$stage/code" python3 -m diffattn.grading.assignment "$stage" $EXERCISES) || exit 2
    echo "$only" > "$stage/EXERCISES"
fi
if [ -n "$hidden" ]; then
    mkdir -p "$stage/hidden_tests"
    cp -R "$hidden"/. "$stage/hidden_tests/"
fi
PYTHONPATH="$stage/code" python3 -m diffattn.grading.manifest "$stage" > /dev/null
cp "$root/tests/grading/gradescope/setup.sh" "$root/tests/grading/gradescope/run_autograder" "$stage/"
# Gradescope unpacks the zip into /autograder/source; setup.sh and run_autograder must sit at its root.
rm -f "$zip_path"
(cd "$stage" && zip -qr "$zip_path" .)
echo "wrote $zip_path${only:+ (grades $only only)}"
