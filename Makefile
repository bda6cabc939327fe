# Two commands do all the set-up on a fresh machine (Python 3.11+; Java 17+ for Spark):
#   make run    creates .venv, installs tupletree, runs the word-count topology
#   make test   creates .venv, installs tupletree with its test tools, runs the tests
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# tupletree is installed, not linked (-e): the build compiles the hot path with mypyc
# (setup.py), and an in-place .so would shadow later edits of its .py. So any change
# under src/ reinstalls (about a minute). TUPLETREE_PURE=1 builds without compiling.
SOURCES := pyproject.toml setup.py $(shell find src -name '*.py')

.PHONY: run test test-pure lint bench clean mutation

$(STAMP): $(SOURCES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	rm -rf build  # setuptools would package a stale build/lib
	$(BIN)/python -m pip install --quiet '.[dev]'
	touch $(STAMP)

# The same suite (Spark tests aside) against an interpreted build, the fallback that a
# machine without a C compiler gets.
PURE := .venv-pure
$(PURE)/.installed: $(SOURCES)
	test -x $(PURE)/bin/python || $(PYTHON) -m venv $(PURE)
	$(PURE)/bin/python -m pip install --quiet --upgrade pip
	rm -rf build
	TUPLETREE_PURE=1 $(PURE)/bin/python -m pip install --quiet '.[dev]'
	touch $@

test-pure: $(PURE)/.installed
	TUPLETREE_PURE=1 $(PURE)/bin/python -m pytest -m "not spark"

# Mutation check (mutmut) of src/tupletree/reliability/ and runtime/ on the pure build;
# slow (an hour or more), not part of CI. MUTANTS="tupletree.reliability*" narrows it.
# Results stay in mutants/ (`.venv-pure/bin/mutmut results`, `... show NAME`).
MUTANTS ?=
mutation: $(PURE)/.installed
	TUPLETREE_PURE=1 $(PURE)/bin/mutmut run --max-children 2 $(MUTANTS)
	$(PURE)/bin/mutmut results

run: $(STAMP)
	$(BIN)/tupletree run examples/word_count.py

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(PURE) build .pytest_cache .ruff_cache .hypothesis mutants
