# Two entry points for a fresh machine (Python 3.11+): `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: install browser demo lint test test-fast bench bench-peer clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# setuptools' notice that an editable install imports from this folder (a UserWarning it calls InformationOnly)
	@# is muted by module; warnings about the package's own configuration come from other modules and still show.
	PYTHONWARNINGS=ignore::UserWarning:setuptools.command.editable_wheel $(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# Debian's Chromium and its chromedriver, for the tests that open `relevancy-monitor report`'s HTML and the web UI
# (`relevancy-monitor ui`, driven by Selenium) in a headless browser. Installed only when missing and we are root (CI
# is); otherwise this says how, and those tests fail naming `make browser`.
browser:   ## Debian chromium + chromium-driver for the browser tests (installed when missing and root)
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	else \
		echo "make browser: /usr/bin/chromium or /usr/bin/chromedriver is missing; as root: apt-get update && apt-get install -y chromium chromium-driver"; \
	fi

demo: install   ## local broker + generated traffic + monitor on embedded ClickHouse, then a summary
	$(VENV)/bin/relevancy-monitor demo

lint: install   ## ruff (lint and format), strict mypy, the import layers, and dead code (vulture)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/vulture

# The suite on PYTEST_WORKERS processes (pytest-xdist). Most tests wait on a broker, a subprocess or a timer, so more
# workers than cores pay off. loadgroup hands each worker the next test (or xdist_group) when it is nearly free, the
# long ones first (tests/conftest.py). PYTEST_WORKERS=0 runs the suite in one process.
PYTEST_WORKERS ?= 4
PARALLEL := -n $(PYTEST_WORKERS) --dist loadgroup
# Bytecode on for the suite, even where the environment turns it off (PYTHONDONTWRITEBYTECODE=1, as in many CI
# images): otherwise each worker re-does pytest's assertion rewriting of every test module (4 CPU-s a worker) and
# each of the suite's ~60 subprocesses compiles the package again. Caches land in the gitignored __pycache__/.
test test-fast: export PYTHONDONTWRITEBYTECODE :=

test: lint browser   ## lint, then the whole suite, slow fault tests included (what CI runs)
	$(PY) -m pytest -q -ra $(PARALLEL)

test-fast: install browser   ## skip the slow fault tests
	$(PY) -m pytest -q -ra $(PARALLEL) -m "not slow"

bench: install
	$(PY) -m bench.run_all

# DeepEval goes into a bench-only venv (.bench-venv/, pinned by bench/requirements-peer.txt), which the benchmark
# creates on first run; the project's venv never gets it. The same comparison also runs, last, in `make bench`.
bench-peer: install   ## the statements judge beside DeepEval's AnswerRelevancyMetric, same fake API, same run
	$(PY) -m bench.peer_deepeval

clean:
	rm -rf $(VENV) .relevancy-monitor .pytest_cache .hypothesis .mypy_cache .ruff_cache
