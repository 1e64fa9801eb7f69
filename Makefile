# Two commands do all setup on a fresh machine (Python 3.10+; nothing else installed):
#   make course   create .venv, install, run every lesson's experiments, regenerate outputs/
#   make test     create .venv, install, run the test suite (what CI runs: .ci/run)
PYTHON     ?= python3
VENV       ?= .venv
PY         := $(VENV)/bin/python
# The CPU build; a bare `torch` would pull a multi-GB CUDA build on Linux.
TORCH_SPEC ?= torch==2.13.0
STAMP      := $(VENV)/.installed-$(shell echo "$(TORCH_SPEC)" | tr -c 'a-zA-Z0-9.\n' '_')
PYTEST     := $(PY) -m pytest

.PHONY: course test test-slow grade lessons-check lessons-sync notebooks-clean gpu-check train-small clean help

help:
	@echo "make course      run every lesson's experiments on CPU (GPU when present), refresh outputs/"
	@echo "make test        run the test suite (reference implementation)"
	@echo "make grade       grade exercises/ and write results.json (Gradescope format)"
	@echo "make test-slow   also run the tests marked slow"
	@echo "make lessons-sync  rewrite the numbers quoted in lessons/ from outputs/numbers.json"
	@echo "make train-small lesson 08's laptop comparison: every variant x 3 seeds on cpu-small (commit outputs/compare/)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $@

course: $(STAMP)
	$(PY) -m diffattn course

test: $(STAMP)
	$(PYTEST) -m "not slow"

test-slow: $(STAMP)
	$(PYTEST)

# Grades the stubs in exercises/ (not the reference); prints points per exercise.
grade: $(STAMP)
	-$(PYTEST) -m graded --impl=exercises --results-json=results.json -q --tb=no -rN

# Lesson 08's laptop comparison (cpu-small, every variant x 3 seeds, on CPU); then lesson 08 picks the results up.
# Commit outputs/compare/cpu-small-text/ afterwards: its summary.json names the machine.
train-small: $(STAMP)
	$(PY) -m diffattn compare --preset cpu-small --seeds 3
	$(PY) -m diffattn course --lessons 08
	$(PY) -m diffattn eval suite --preset cpu-small

lessons-check: $(STAMP)
	$(PY) -m diffattn lessons check

lessons-sync: $(STAMP)
	$(PY) -m diffattn lessons sync

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) .pytest_cache results.json
