# Two commands do all setup on a fresh machine (Python 3.10+; nothing else installed):
#   make course   create .venv, install, run every lesson's experiments, regenerate outputs/
#   make test     create .venv, install, run the test suite (what CI runs: .ci/run)
PYTHON     ?= python3
VENV       ?= .venv
PY         := $(VENV)/bin/python
# torch==2.13.0 is a CPU wheel on this course's CI (its package registry serves one). Against the public PyPI index a
# Linux machine gets the default wheel, the CUDA build (several GB); TORCH_INDEX picks PyTorch's own CPU index:
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
STAMP      := $(VENV)/.installed-$(shell echo "$(TORCH_SPEC)" | tr -c 'a-zA-Z0-9.\n' '_')
PYTEST     := $(PY) -m pytest

.PHONY: new-lesson course test test-fast test-slow browser-deps site grade handout gradescope-zip mutation lessons-check lessons-sync notebooks-clean gpu-check gpu-rehearsal train-small clean help

help:
	@echo "make course      run every lesson's experiments on CPU (GPU when present), refresh outputs/"
	@echo "make test        run the test suite (reference implementation)"
	@echo "make grade       grade exercises/ and write results.json (Gradescope format); EX=ex05 for one exercise"
	@echo "make handout DEST=dir  the student copy, without the solutions (EXERCISES=\"ex01 ex02\": one assignment's)"
	@echo "make mutation LESSON=NN  mutation-test lesson NN's graded tests (mutmut)"
	@echo "make test-fast   the inner loop: stdlib track, layers, variants, model, CLI units (about half a minute)"
	@echo "make test-slow   also run the tests marked slow"
	@echo "make site        the course as a static site in build/site/html (lessons, executed notebooks, explorer; offline)"
	@echo "make browser-deps  Chromium + chromedriver for the browser tests (Debian/Ubuntu, as root; CI runs it)"
	@echo "make lessons-sync  rewrite what lessons/src/ and docs/src/ quote, then render lessons/ and docs/"
	@echo "make new-lesson NN=14 SLUG=roofline  scaffold a lesson's markdown, notebook, experiment, exercise and test"
	@echo "make train-small the cpu-small results of lessons 08-11 (about an hour on 2 cores; commit outputs/)"
	@echo "make gpu-check   the prepared GPU run (scripts/gpu_check.sh); make gpu-rehearsal runs it on CPU"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $@

course: $(STAMP)
	$(PY) -m diffattn course

test: $(STAMP) browser-deps
	$(PYTEST) -m "not slow"

# The inner loop (CONTRIBUTING.md, "The inner loop"): the stdlib track, the layer and registry checks, the model and the
# command line's unit tests; about half a minute on 2 cores, no training, no grader, no browser
FAST_TESTS := tests/test_01_softmax.py tests/test_02_diff_attention.py tests/test_03_snr.py tests/test_04_accounting.py \
              tests/test_pure_stdlib_only.py tests/test_layers.py tests/test_variant_registry.py tests/test_05_diff_v1.py \
              tests/test_05_properties.py tests/test_07_model.py tests/test_07_v2_gqa.py tests/test_cli.py \
              tests/test_12_roofline.py tests/test_13_plan.py tests/test_numberkinds.py
test-fast: $(STAMP)
	$(PYTEST) -q -m "not slow" $(FAST_TESTS)

test-slow: $(STAMP) browser-deps
	$(PYTEST)

# The static site (site/conf.py; README, "Course map"): Sphinx, warnings as errors (-n -W), notebooks
# executed into build/site only (cached: a rebuild reruns only changed notebooks; a fresh build runs all 13, about two
# minutes of CPU), then the offline link check.
SITE       := build/site
SITE_STAMP := $(VENV)/.installed-site
$(SITE_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev,site]"
	touch $@

site: $(SITE_STAMP)
	$(PY) -m diffattn.pure.explorer $(SITE)/extra/site/explorer.html
	$(PY) -m sphinx -n -W --keep-going -b html -c site -d $(SITE)/doctrees . $(SITE)/html
	$(PY) site/linkcheck.py $(SITE)/html
	@echo "the site: $(SITE)/html/index.html (open it in a browser; it loads nothing from the network)"

# The browser tests (tests/test_site_browser.py) drive Debian's Chromium with selenium; without it they skip. As root on
# Debian/Ubuntu this installs it (about 2 min, ~300 MB); otherwise it says how. Never fails: the tests report the rest.
browser-deps:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then echo "browser-deps: chromium and chromedriver present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null \
	  || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null; } \
	  || echo "browser-deps: apt-get could not install chromium chromium-driver; the browser tests will skip"; \
	else echo "browser-deps: run as root (sudo make browser-deps) or: sudo apt-get install chromium chromium-driver"; fi

# Grades exercises/ (not the reference), each exercise in its own process: `make grade EX=ex05` for one, DETAILS=1
# for each part's first failure in full. Exits 0 whenever grading completed, whatever the score.
grade: $(STAMP)
	$(PY) -m diffattn grade $(if $(EX),--only $(EX)) $(if $(DETAILS),--details) --json results.json

# The student copy: exercises/ and the reference solutions replaced by the stubs (tests/grading/stubs/),
# MANIFEST.sha256 of the tests.
handout: $(STAMP)
	@test -n "$(DEST)" || { echo "usage: make handout DEST=dir [EXERCISES=\"ex01 ex02\"] [NO_ANSWERS=1]"; exit 2; }
	$(PY) -m diffattn.grading.handout $(DEST) $(if $(EXERCISES),--exercises $(EXERCISES)) $(if $(NO_ANSWERS),--no-answers)

# autograder.zip for Gradescope; HIDDEN=dir adds a folder of hidden graded tests; EXERCISES="ex01 ex02" makes it one
# assignment's (it grades only those).
gradescope-zip:
	EXERCISES="$(EXERCISES)" bash tests/grading/gradescope/make_autograder.sh $(HIDDEN)

# Mutation testing of the reference functions the exercises re-implement, through the graded tests only (mutmut):
# `make mutation LESSON=03` (minutes on 2 cores); scores in tests/grading/README.md.
mutation: $(STAMP)
	$(PY) -m tests.grading.mutation $(or $(LESSON),$(error usage: make mutation LESSON=01))

# The laptop-size results lessons 08-11 report, on CPU (about an hour on 2 cores): `study` trains every run once, two
# at a time (diffattn/training/study_runs.py declares them: lesson 08's comparison, V1's initialisation 2×2 and alternatives, the
# low-floor retrieval tasks, the cpu-small `needles` checkpoints); `compare`, the λ_init ablation and `eval suite`
# then reuse those runs and only tabulate and evaluate; then the lessons pick the results up. Commit outputs/study/,
# outputs/compare/cpu-small-text*/ and outputs/eval/cpu-small/ afterwards: each summary names the machine.
JOBS ?= 2
train-small: $(STAMP)
	$(PY) -m diffattn study --jobs $(JOBS)
	$(PY) -m diffattn compare --preset cpu-small --seeds 5 --reuse
	$(PY) -m diffattn compare --preset cpu-small --lambda-init schedule,0.8,0.5 --seeds 5 --reuse
	$(PY) -m diffattn eval suite --preset cpu-small --seeds 3 --samples 16
	$(PY) -m diffattn course --lessons 08,09,10,11

# A new lesson's files (diffattn/cli/scaffold.py): NO_EXERCISE=1 for a lesson without exercises.
new-lesson:
	@test -n "$(NN)" -a -n "$(SLUG)" || { echo "usage: make new-lesson NN=14 SLUG=roofline [TITLE='Rooflines']"; exit 2; }
	PYTHONPATH=code $(PYTHON) -m diffattn.cli.scaffold $(NN) $(SLUG) $(if $(TITLE),--title "$(TITLE)") $(if $(NO_EXERCISE),--no-exercise)

lessons-check: $(STAMP)
	$(PY) -m diffattn lessons check

lessons-sync: $(STAMP)
	$(PY) -m diffattn lessons sync

# The prepared GPU run (README, "GPU track"); gpu-rehearsal runs it on CPU at cpu-tiny size, as `make test` does.
gpu-check:
	bash scripts/gpu_check.sh

gpu-rehearsal: $(STAMP)
	PYTHON=$(PY) bash scripts/gpu_check.sh --cpu outputs/gpu/rehearsal

clean:
	rm -rf $(VENV) .pytest_cache results.json mutants autograder.zip
