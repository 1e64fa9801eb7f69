#!/usr/bin/env bash
# Gradescope image setup: Python 3, the CPU build of PyTorch, and the test dependencies.
set -euo pipefail
apt-get update -qq && apt-get install -y -qq python3 python3-pip python3-venv > /dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --quiet torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/pip install --quiet -e "/autograder/source[dev]"
