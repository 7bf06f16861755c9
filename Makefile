# `make check` runs what CI (.ci/run) runs, in the current environment (pip install -e '.[dev,docs]').
PY ?= python

.PHONY: check lint types pyversion docs test quick keys

check: lint types pyversion docs test

lint:
	ruff check .
	ruff format --check .
	lint-imports

types:
	mypy

# The oldest Python the code needs must be the one requires-python names (3.11).
pyversion:
	vermin --no-tips --eval-annotations --violations -t=3.11- tui_prof tests examples benchmarks

docs:
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet

test:
	$(PY) -m pytest -q

# The inner loop: under two minutes, no framework jobs.
quick:
	$(PY) -m pytest -q -m quick

# docs/keys.md from the key bindings (tests/unit/test_docs.py fails when it drifts).
keys:
	$(PY) -m tui_prof.tui.screens.help > docs/keys.md
