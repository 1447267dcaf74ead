# Every target bootstraps .venv on first use (idempotent: re-runs only when the inputs change).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-extended test-inductor test-real test-vllm bench bench-kernel venv clean

$(STAMP): pyproject.toml requirements/constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-c requirements/constraints.txt -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

## The main job: the ASV suite's quick tier on the embedded reference subject (pre-#810 and
## #810 as merged), offline, on this machine's device, ending with their comparison.
run: $(STAMP)
	$(BIN)/spyre-bench run

## The default test run: the linter, then the tests (benchmarks disabled; see `make bench`).
test: $(STAMP)
	$(BIN)/ruff check harness benchmarks tests
	$(BIN)/python -m pytest

## The long end-to-end tests the default run leaves out (plain ASV over a history, timing
## verdicts on real kernels, backfill shards, the workflows run locally); CI runs them after `test`.
test-extended: $(STAMP)
	$(BIN)/python -m pytest -m extended

## Opt-in: the tests that compile with inductor (cold cache; tens of seconds per graph on a CPU).
test-inductor: $(STAMP)
	$(BIN)/python -m pytest -m inductor

## Opt-in real-code acceptance: every command on the commits of a real spyre-inference checkout
## (REAL=<path to its git checkout>; REAL_REVS="rev .." to pick commits). Skipped without REAL.
test-real: $(STAMP)
	SPYRE_BENCH_REAL="$(REAL)" REAL_REVS="$(REAL_REVS)" $(BIN)/python -m pytest \
		tests/real -v

## Opt-in contract with the real vLLM 0.28.0: the fixture commits (and REAL's, as for test-real)
## through cost and ladders with the stand-ins and with the real vLLM, figures identical. Its own
## venv: the project as `make venv` installs it, then vLLM and the packages its imports need, all
## with --no-deps (vLLM's declared dependencies pull CUDA, triton and xgrammar).
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

$(VLLM_STAMP): pyproject.toml requirements/constraints.txt requirements/vllm-constraints.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-c requirements/constraints.txt -e '.[test]'
	$(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
		-r requirements/vllm-constraints.txt
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	SPYRE_BENCH_REAL="$(REAL)" REAL_REVS="$(REAL_REVS)" $(VLLM_VENV)/bin/python -m pytest \
		tests/vllm_contract -v

## Benchmarks of the harness itself (pytest-benchmark), with their timings.
bench: $(STAMP)
	$(BIN)/python -m pytest -n 0 tests/bench --benchmark-enable --benchmark-columns=min,median,max,rounds

## The full tier of decode-kernel microbenchmarks (the notes' defaults, the review's buckets).
bench-kernel: $(STAMP)
	mkdir -p .benchmarks && $(BIN)/python -m pytest -n 0 tests/bench/test_kernel_bench.py -m 'not inductor' --benchmark-enable \
		--benchmark-columns=min,median,iqr,max,rounds --benchmark-json=.benchmarks/kernel.json

## Everything the project creates: the venv, ASV's environments (.asv/env-test is 1.2 GB after
## `make test`), logs and the reference repository, caches, build output, and the git-ignored
## files in results/ (laptop runs of the reference; committed history stays), and the per-user
## cache (~/.cache/spyre-bench: the figures memo and the measured bandwidth).
clean:
	rm -rf $(VENV) $(VLLM_VENV) .asv .pytest_cache .ruff_cache .benchmarks .hypothesis build dist html \
		test-artifacts *.egg-info .spyre-bench.lock
	find . -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +
	if git rev-parse --git-dir >/dev/null 2>&1; then git clean -fdXq -- results; fi
	rm -rf "$${XDG_CACHE_HOME:-$$HOME/.cache}/spyre-bench"   # figures memo, bandwidth
