# Every target bootstraps .venv on first use (idempotent: re-runs only when the inputs change).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench venv clean

$(STAMP): pyproject.toml requirements/constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-c requirements/constraints.txt -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

## The main job on the embedded reference subject: what changed from pre-#810 to #810 as merged.
run: $(STAMP)
	$(BIN)/spyre-bench ladders --base reference:pre-810 --head reference:post-810-clamp \
		--tier quick --changed-only

## The default test run (benchmarks disabled; see `make bench`).
test: $(STAMP)
	$(BIN)/python -m pytest

## Benchmarks of the harness itself (pytest-benchmark), with their timings.
bench: $(STAMP)
	$(BIN)/python -m pytest tests/bench --benchmark-enable --benchmark-columns=min,median,max,rounds

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks .hypothesis
