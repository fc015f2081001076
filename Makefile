# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_DIR ?= $(CURDIR)/demo-vault
STAMP := $(VENV)/.installed

.PHONY: demo test install clean bench

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash demo/run.sh "$(DEMO_DIR)"

test: $(STAMP)
	$(PY) -m pytest -q -n 2

bench: $(STAMP)
	for b in bench/bench_*.py; do $(PY) $$b || exit 1; done

# Only folders we made are removed: the demo vault if it carries the demo's marker,
# the venv if it is one (pyvenv.cfg); never a folder DEMO_DIR or VENV merely names.
clean:
	bash demo/run.sh --clean "$(DEMO_DIR)"
	if [ -f "$(VENV)/pyvenv.cfg" ]; then rm -rf -- "$(VENV)"; fi
	rm -rf build src/*.egg-info
