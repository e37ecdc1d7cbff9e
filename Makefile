# flintlock: the two set-up commands are `make demo` and `make test` (see README).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
SF ?= 1
DATA ?= data
STAMP := $(VENV)/.installed

.PHONY: demo test install data clean lint

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,data,dev]'
	touch $(STAMP)

install: $(STAMP)

data: $(STAMP)
	$(BIN)/python -m examples.data --sf $(SF) --out $(DATA)

demo: data
	-$(BIN)/python -m flintlock.runtime.spark.class_data_sharing ensure
	$(BIN)/python -m examples.demo --data $(DATA) --sf $(SF)

test: $(STAMP)
	$(BIN)/python -m examples.data --sf 0.01 --out $(DATA)/test --quiet
	-$(BIN)/python -m flintlock.runtime.spark.class_data_sharing ensure
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check flintlock tests examples benchmarks
	$(BIN)/mypy flintlock

clean:
	rm -rf $(VENV) build *.egg-info

# Benchmarks (docs/benchmarks.md): flintlock vs plain PySpark, PyFlink and DuckDB, ~2 h at SF 1.
# BENCH_ARGS passes options, e.g. BENCH_ARGS="--workloads q1,q6 --runs 5".
.PHONY: bench
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks run --sf $(SF) --data $(DATA) $(BENCH_ARGS)
