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
	$(BIN)/dpwise train --strategy single --epochs 2 --out $(DEMO_OUT)/single
	$(BIN)/dpwise train --strategy dp --epochs 2 --out $(DEMO_OUT)/dp
	$(BIN)/dpwise train --strategy ddp --nproc 2 --epochs 2 --out $(DEMO_OUT)/ddp
	@echo "demo: reports (metrics.json, final.pt) are in $(DEMO_OUT)/{single,dp,ddp}/"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

test: lint
	$(BIN)/python -m pytest -q

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

bench: $(STAMP)
	$(BIN)/python bench/engine_overhead.py
	$(BIN)/python bench/input_path.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
