# Set-up: `make demo` and `make test` each create .venv when it is missing, install dpwise, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_OUT ?= runs/demo

.PHONY: demo test lint format bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dpwise compare --out $(DEMO_OUT)
	@echo "demo: open $(DEMO_OUT)/report.html (also report.md and results.json in $(DEMO_OUT)/)"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports --no-cache

test: lint
	$(BIN)/python -m pytest -q

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

bench: $(STAMP)
	$(BIN)/python bench/engine_overhead.py
	$(BIN)/python bench/input_path.py
	$(BIN)/python bench/compare_budget.py
	$(BIN)/python bench/estimate_accuracy.py
	$(BIN)/python bench/advise_7b.py
	$(BIN)/python bench/lint_speed.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
