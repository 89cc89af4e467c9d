# Each target sets itself up on a fresh machine: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-run: $(BIN)/python setup.cfg pyproject.toml build_backend/graphview_build.py
	$(BIN)/python -m pip install --quiet -e ".[examples,plot]"
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-run
	$(BIN)/python -m pip install --quiet -e ".[test,examples,plot]"
	touch $@

# The main job: what graphview is for, on the built-in ops and on the examples.
run: $(VENV)/.installed-run
	$(BIN)/python examples/quickstart.py
	$(BIN)/graphview gradcheck
	$(BIN)/graphview gradcheck examples/mlp.py:build --max-per-param 50
	$(BIN)/graphview gradcheck examples/regression.py:build --fast
	$(BIN)/python examples/views_inplace.py
	$(BIN)/python examples/layouts.py
	$(BIN)/python examples/train_digits.py --out out
	$(BIN)/graphview gradcheck examples/cnn_digits.py:build --max-per-param 20
	$(BIN)/python examples/cnn_digits.py
	$(BIN)/python examples/sequence_digits.py
	$(BIN)/graphview gradcheck examples/sequence_digits.py:build --max-per-param 20

test: $(VENV)/.installed-test
	$(BIN)/graphview adr check
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed-run
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_views.py
	$(BIN)/python benchmarks/bench_gradcheck.py
	$(BIN)/python benchmarks/bench_train.py
	$(BIN)/python benchmarks/bench_layers.py
	$(BIN)/python benchmarks/bench_recurrent.py
	$(BIN)/python benchmarks/bench_activations.py
	$(BIN)/python benchmarks/bench_fusion.py

clean:
	rm -rf $(VENV) build *.egg-info
