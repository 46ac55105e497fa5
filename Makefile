# Two commands do all the set-up: `make reproduce` (every notebook, cpu profile) and `make test`.
# `make check` is the edit loop (lint and the fast tests); `make verify` compares a run with the committed one.
# Both create .venv when it is missing and install into it, skipping the install when the requirement
# files have not changed since the last one (a hash of them is kept in .venv/.installed).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PROFILE ?= cpu
REQS   := requirements.txt requirements-nodeps.txt pyproject.toml

.PHONY: install doctor reproduce budget-curve rehearse test browser-test check verify lint format strip clean-results

install:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@hash=$$(cat $(REQS) | sha256sum | cut -d' ' -f1); \
	if [ "$$(cat $(VENV)/.installed 2>/dev/null)" = "$$hash" ]; then \
	  echo "install: requirements unchanged since the last install, skipping"; \
	else \
	  $(PY) -m pip install --quiet --upgrade pip && \
	  torch_args=$$($(PY) scripts/torch_route.py) && \
	  if [ -n "$$torch_args" ]; then \
	    $(PY) -m pip install --quiet $$torch_args "$$(grep -E '^torch==' requirements.txt | cut -d' ' -f1)"; \
	  fi && \
	  $(PY) -m pip install --quiet -r requirements.txt && \
	  $(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt && \
	  $(PY) -m pip install --quiet --no-deps --no-build-isolation -e . && \
	  echo "$$hash" > $(VENV)/.installed && echo "install: done"; \
	fi
	@sh scripts/sandbox_os.sh $(PY)
	@sh scripts/browser_os.sh

# The pre-lab check for a student's machine (scripts/doctor.py): Python, free disk, the venv, a kernel, notebook 00's
# Run All on a copy of the committed cpu run, and the FrozenLake map cache; a PASS or FAIL line each and a verdict.
doctor:
	@test -x $(PY) || { echo "FAIL  virtual environment: $(PY) is missing (run make install)"; exit 1; }
	@OMP_NUM_THREADS=1 $(PY) scripts/doctor.py

# The cpu profile's notebooks share one kernel (`--one-kernel`: each starts from an empty namespace; a kernel's start and
# imports are about 8 s a notebook there); the GPU profiles give each notebook a kernel of its own, and its memory back.
reproduce: install
	$(PY) -m helpers.run --profile $(PROFILE) --fresh $(if $(filter cpu,$(PROFILE)),--one-kernel)

# Issue 50's compute curve (configs/cpu_budget_curve.yaml, helpers.budget_curve): BudgetMix for three seeds at five times
# the recipe's RL steps from the cpu base (taken from results/cpu/models when `make reproduce` built it there), the
# opening responsiveness and doorway success at the base and every saved step. About 40 minutes on 2 cores.
budget-curve: install
	KIT_BASE_CACHE=$(CURDIR)/results/cpu/models OMP_NUM_THREADS=1 $(PY) -m helpers.budget_curve

# The gpu profile's code paths on CPU before a GPU is lent (configs/qwen3_rehearsal.yaml): every notebook with Qwen3's
# real tokenizer and chat template on a small random Qwen3 (bfloat16 autocast, the HF backend), then the TRL path
# under torchrun on 2 processes, the weights of both ranks compared (scripts/rehearse_trl.py). Numbers mean nothing.
# Not part of `make test` (see the README for its time).
rehearse: install
	OMP_NUM_THREADS=1 $(PY) -m helpers.run --profile qwen3_rehearsal --fresh
	OMP_NUM_THREADS=1 $(VENV)/bin/torchrun --standalone --nproc_per_node 2 scripts/rehearse_trl.py \
	  --profile qwen3_rehearsal --out results/qwen3_rehearsal/trl-check

# Every test, in two pytest-xdist workers (`-n 2`: two cores) that share one folder of built bases
# (KIT_BASE_CACHE) and the smoke series (each environment's series runs once, in whichever worker reaches it
# first; tests/conftest.py groups the tests that share a fixture). One torch thread per process
# (OMP_NUM_THREADS, inherited by kernels and workers), so the workers never oversubscribe the two cores.
WORKERS ?= 2
test: lint
	@cache=$$(mktemp -d); export KIT_BASE_CACHE=$$cache OMP_NUM_THREADS=1; \
	$(PY) -m pytest -q -n $(WORKERS) --dist loadgroup --no-loadscope-reorder --durations=30; rc=$$?; \
	rm -rf $$cache; exit $$rc

# JupyterLab in headless Chromium (tests/test_browser.py, also part of `make test`): Run All on a small notebook, the
# progress widgets on the page, no cell error; writes the committed screenshot results/browser/notebook.png.
browser-test: install
	KIT_BROWSER_SCREENSHOT=results/browser/notebook.png OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 0 -s tests/test_browser.py

# The edit loop: lint and the fast tests (no training, no kernels, no smoke series, no Run All).
check: lint
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(WORKERS) --dist loadgroup -m "not slow and not series and not interactive"

# Compare a run's metrics.json with the committed run, leaf by leaf, timings ignored (helpers.verify):
#   make verify                      results/cpu against results/cpu as committed at HEAD
#   make verify RUN=/tmp/kit/cpu     another run of the cpu profile;  REF=FOLDER  another reference folder
RUN ?= results/$(PROFILE)
verify: install
	$(PY) -m helpers.verify --run $(RUN) $(if $(REF),--reference $(REF))

# Dead code (vulture): names defined in helpers/, scripts/ and benchmarks/ that nothing reads. Notebooks and tests
# are outside its view: what only they call, or what is called by name, is listed in .vulture_whitelist.py.
# The formatter owns the layout: no `# fmt: skip` / `# fmt: off` anywhere (README, "Three more for working on the kit").
lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	@! grep -rnE --include='*.py' --include='*.ipynb' '# fmt: (skip|off)' helpers tests scripts benchmarks notebooks \
	  || { echo "lint: a '# fmt:' pragma above; the formatter owns the layout (make format)"; exit 1; }
	$(PY) -m vulture helpers scripts benchmarks .vulture_whitelist.py --min-confidence 60

format: install
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

# Strip outputs and Papermill metadata from the source notebooks (executed copies live in results/).
strip: install
	$(PY) -m helpers.nbtools strip notebooks/*.ipynb
