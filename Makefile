# Set-up: `make demo` and `make test` each create .venv when it is missing, install dpwise, then run.
# `make docs` builds the documentation site into site/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_OUT ?= runs/demo

# The test suite's processes: one per core. The suite computes more than it waits (its processes
# keep every core busy), and a process more makes each test slower without the whole ending
# sooner: on 2 cores, a fresh clone's run took 606 s with 2 and 639-651 s with 3.
PYTEST_WORKERS ?= $(shell nproc)

.PHONY: demo test lint format bench docs docs-check clean

# Bytecode: pip would compile every file it installs (11,000 here, most of which nothing imports:
# a minute on 2 cores). It installs without (--no-compile); each module's bytecode is cached the
# first time something imports it, torch's right after the install. Where PYTHONDONTWRITEBYTECODE
# is set nothing would be cached and each of the suite's processes would compile torch again, so
# make's commands run without it.
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile -c constraints.txt -e '.[dev]'
	$(BIN)/python -c "import torch, torch._dynamo"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dpwise compare --out $(DEMO_OUT)
	@echo "demo: open $(DEMO_OUT)/report.html (also report.md and results.json in $(DEMO_OUT)/)"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench docs/gen_rule_pages.py docs/gen_command_table.py
	$(BIN)/ruff format --check src tests bench docs/gen_rule_pages.py docs/gen_command_table.py
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# The documentation site (mkdocs.yml; the lint rule pages are generated from the rules' own docs).
# Material and mkdocs-gen-files each print a notice about MkDocs' future on every build; these
# two variables are their documented switches to hide them, so the build prints only its own lines.
MKDOCS := NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs

docs: $(STAMP)
	$(MKDOCS) build --strict
	@echo "docs: open site/index.html"

# The strict build, into a temporary folder that is removed: nothing is left in the tree. Not with
# --quiet: it hides the warnings that --strict counts, so a broken link would pass. The build's log
# is shown only when it fails.
docs-check: $(STAMP)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  if $(MKDOCS) build --strict -d "$$tmp/site" >"$$tmp/log" 2>&1; then \
	    echo "docs: strict build passed"; \
	  else cat "$$tmp/log"; exit 1; fi

# The suite runs on PYTEST_WORKERS processes (pytest-xdist), a test file on one of them: a
# module's fixture is made once; network-namespace tests of several files may run at once, each
# looking only at its own pair (tests/netlab.py). It prints the ten slowest tests. The lint (ruff, mypy, the layer contracts) and the
# docs' strict build run beside it (their lines come after the suite's); any failing fails the
# target.
PYTEST = $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=10
test: $(STAMP)
	@echo "$(PYTEST)"; tmp=$$(mktemp) && trap 'rm -f "$$tmp"' EXIT && \
	  { { $(MAKE) --no-print-directory lint && $(MAKE) --no-print-directory docs-check; } \
	    >"$$tmp" 2>&1 & checks=$$!; } && \
	  $(PYTEST); \
	  suite=$$?; wait $$checks; checked=$$?; cat "$$tmp"; \
	  test $$suite -eq 0 -a $$checked -eq 0

format: $(STAMP)
	$(BIN)/ruff format src tests bench docs/gen_rule_pages.py docs/gen_command_table.py
	$(BIN)/ruff check --fix src tests bench docs/gen_rule_pages.py docs/gen_command_table.py

bench: $(STAMP)
	$(BIN)/python bench/engine_overhead.py
	$(BIN)/python bench/input_path.py
	$(BIN)/python bench/compare_budget.py
	$(BIN)/python bench/estimate_accuracy.py
	$(BIN)/python bench/advise_7b.py
	$(BIN)/python bench/lint_speed.py
	$(BIN)/python bench/script_overhead.py
	$(BIN)/python bench/watch_overhead.py
	$(BIN)/python bench/simulate_scale.py

clean:
	rm -rf $(VENV) runs site .pytest_cache .ruff_cache
