# Two commands do all the set-up: `make reproduce` (every notebook, cpu profile) and `make test`.
# Both create .venv when it is missing and install into it, skipping the install when the requirement
# files have not changed since the last one (a hash of them is kept in .venv/.installed).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PROFILE ?= cpu
REQS   := requirements.txt requirements-nodeps.txt pyproject.toml

.PHONY: install reproduce test lint format strip clean-results

install:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@hash=$$(cat $(REQS) | sha256sum | cut -d' ' -f1); \
	if [ "$$(cat $(VENV)/.installed 2>/dev/null)" = "$$hash" ]; then \
	  echo "install: requirements unchanged since the last install, skipping"; \
	else \
	  $(PY) -m pip install --quiet --upgrade pip && \
	  $(PY) -m pip install --quiet -r requirements.txt && \
	  $(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt && \
	  $(PY) -m pip install --quiet --no-deps --no-build-isolation -e . && \
	  echo "$$hash" > $(VENV)/.installed && echo "install: done"; \
	fi
	@sh scripts/sandbox_os.sh $(PY)

reproduce: install
	$(PY) -m helpers.run --profile $(PROFILE) --fresh

test: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -q

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: install
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

# Strip outputs and Papermill metadata from the source notebooks (executed copies live in results/).
strip: install
	$(PY) -m helpers.nbtools strip notebooks/*.ipynb
