# `make run`: set up .venv from uv.lock (if missing or stale), then run the pipeline end to end.
# `make test`: same set-up, then the linter (`make lint`) and the test suite.
# `make bench`: same set-up, then the benchmarks, written to docs/performance.md.
SHELL := /bin/bash
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY ?= python3
UV_VERSION := 0.13.8
# Which TensorFlow build to install: cpu, or gpu for CUDA machines (`make run TF_BUILD=gpu`).
TF_BUILD ?= cpu
# Test processes in parallel (pytest-xdist); CI has 2 cores. Work stealing keeps both busy to the end:
# the long end-to-end tests would otherwise leave one worker idle while the other finishes its queue. The 20
# slowest tests are listed at the end, to show where the suite's time goes.
TEST_WORKERS ?= 2
# `--compile-bytecode` below: every stage, `dvc` and `tracking` process imports TensorFlow, Keras, MLflow and DVC
# (15,000 modules); compiled once at install they load in about half the time, most of all where
# PYTHONDONTWRITEBYTECODE keeps Python from caching them itself (10 s saved per stage process there).
# Prefer a uv on PATH; otherwise bootstrap the pinned one into the venv.
UV := $(or $(shell command -v uv 2>/dev/null),$(BIN)/uv)
export PATH := $(BIN):$(PATH)
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)
# Nothing leaves the machine unasked: MLflow's usage telemetry stays off unless set to false in the environment.
export MLFLOW_DISABLE_TELEMETRY ?= true

.PHONY: run test test-backends test-zoo test-cluster test-sweep lint bench venv clean

venv: $(VENV)/.synced

$(VENV)/.synced: uv.lock pyproject.toml $(VENV)/.build-$(TF_BUILD)
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@test -x $(UV) || $(BIN)/python -m pip install --quiet "uv==$(UV_VERSION)"
	@echo "Setting up $(VENV) from uv.lock: installing the packages, then compiling their bytecode (about 1.5 minutes"
	@echo "on 2 cores the first time; uv prints nothing while it compiles)."
	$(UV) sync --frozen --compile-bytecode --extra $(TF_BUILD) --extra cluster --extra jax --python $(BIN)/python
	@touch $@

# Switching TF_BUILD forces a re-sync, which swaps the TensorFlow wheels.
$(VENV)/.build-$(TF_BUILD):
	@mkdir -p $(VENV)
	@rm -f $(VENV)/.build-*
	@touch $@

# The page `dvc plots show` fills (named in .dvc/config.local), with Vega inside it so its charts draw offline.
PLOTS_PAGE := .dvc/plots/offline.html
$(PLOTS_PAGE): $(VENV)/.synced
	$(BIN)/tracking plots-page

run: venv $(PLOTS_PAGE)
	dvc repro
	@echo
	@echo "Results: metrics/ (dvc metrics show), plots/ (dvc plots show), outputs/model.keras"
	@echo "MLflow runs are in $${MLFLOW_TRACKING_URI:-sqlite:///$(CURDIR)/mlflow.db}. Open the UI with:"
	@echo "  MLFLOW_DISABLE_TELEMETRY=$(MLFLOW_DISABLE_TELEMETRY) $(VENV)/bin/mlflow ui --backend-store-uri $${MLFLOW_TRACKING_URI:-sqlite:///$(CURDIR)/mlflow.db} --port 5000 --workers 1"
	@echo "then pick 'Model training' at the top left of http://127.0.0.1:5000 (MLflow 3.17 starts in its GenAI view),"
	@echo "and close the Assistant panel on the right (its x): run pages then open on their verdict."

test: venv lint $(PLOTS_PAGE)
	pytest -ra -n $(TEST_WORKERS) --dist worksteal --durations=20

# The pipeline on Keras's JAX backend (and PyTorch's, where it is installed: docs/backends.md), with the backend
# checks of the suite: a whole pipeline per backend, which the 20-minute budget of `make test` leaves no room for.
test-backends: venv
	TRACKING_TEST_BACKENDS=1 pytest -ra -n $(TEST_WORKERS) tests/test_backends.py tests/test_backends_pipeline.py

# The zoo's whole matrix (tests/test_zoo.py): the pipelines of all 18 zoo models (`make test` runs two), each
# through `tracking rerun`, each seed through `dvc exp run`, a learning rate 100 times smaller, and the own-script
# models calibrated, judged and rerun: each pipeline costs 100 to 200 s on 2 cores, which the 20-minute budget of
# `make test` leaves no room for.
test-zoo: venv
	TRACKING_TEST_ZOO=1 pytest -ra -n $(TEST_WORKERS) --dist worksteal --durations=30 tests/test_zoo.py \
		tests/test_own_script.py -k "zoo or own_script_zoo or gradient_tape or gan"

# A calibration on a Ray cluster of two nodes, each in a network namespace of its own (tests/test_cluster_nodes.py):
# the head with a real `mlflow server` on PostgreSQL, a worker node killed mid-calibration, a stop and a resume, and
# the local executor's weights bit for bit: about 30 trainings, five stage runs and three Ray node starts, which the
# 20-minute budget of `make test` leaves no room for. Making namespaces needs root (CI runs as root); elsewhere the
# test is skipped, saying why. Then the tests that start a Ray head on 127.0.0.1 (tests/test_cluster.py: workers
# killed mid-repeat, a head killed mid-repeat, a password-protected server, credentials on workers) and a team's deployment: two clones against
# one PostgreSQL-backed `mlflow server`, the second clone's calibration reusing the first's kept repeats, and six
# clones logging the same data through it at once (tests/test_server.py); and a calibration whose `mlflow server` is
# SIGKILLed mid-way, finishing with every repeat kept offline and synced once (tests/test_server_outage.py, 40 s to
# 1.5 min). About 6 minutes in all.
test-cluster: venv
	TRACKING_TEST_CLUSTER=1 pytest -ra -s tests/test_cluster_nodes.py tests/test_cluster.py tests/test_server_outage.py \
		tests/test_server.py::test_two_clones_share_kept_repeats_through_one_postgres_backed_server \
		tests/test_server.py::test_trainings_of_the_same_data_log_it_at_once_through_one_postgres_backed_server

# A sweep as a team runs one (tests/test_sweep_command.py): a grid of 8 experiments queued with DVC's syntax and run by two
# `dvc queue` workers, a ninth by `dvc exp run --run-all`, all on one committed calibration, then `tracking sweep
# --all --confirm 2` judging the 9 as one family and confirming the best on 2 fresh runs: 25 trainings and 32 stage
# runs, which the 20-minute budget of `make test` leaves no room for: 11 min 52 s and 12 min 33 s on a 2-core VM that
# five other test runs loaded (load average 8 to 10); `tracking sweep --all --confirm 2` itself took 11 and 33 s.
test-sweep: venv
	TRACKING_TEST_SWEEP=1 pytest -ra -s tests/test_sweep_command.py::test_a_queued_grid_is_judged_as_one_family_and_its_best_confirmed

# The benchmarks (bench/), one after another (30 to 40 minutes on 2 cores, half of it data_scale.py's 7.5 GB of data
# sets); their output becomes docs/performance.md.
bench: venv
	$(BIN)/python bench/report.py

# The linter and formatter configured in pyproject.toml; `ruff format .` and `ruff check --fix .` mend most of it.
lint: venv
	ruff check .
	ruff format --check .

clean:
	rm -rf $(VENV)
