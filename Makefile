# mrep: the two commands a fresh machine needs are `make demo` and `make test`.
SHELL := /bin/bash
PY      := .venv/bin/python
VENV_OK := .venv/.installed
GO      ?= go
DB      ?= out/mrep.db

.PHONY: demo test test-go test-py venv build examples bench clean

# Main job: build mrep, ingest the bundled example dumps into the embedded SQLite
# database, and show what was ingested.
demo: build
	@mkdir -p out
	./bin/mrep --db $(DB) ingest examples/dumps
	./bin/mrep --db $(DB) runs
	./bin/mrep --db $(DB) show DeepSeek-V3@base

build:
	$(GO) build -o bin/mrep ./cmd/mrep

# All tests: Go (store, ingest, cmd) and Python (exporter, schema fixtures).
test: test-go test-py

test-go:
	$(GO) vet ./...
	$(GO) test ./...

test-py: $(VENV_OK)
	cd exporter && ../$(PY) -m pytest

# A virtual environment with CPU-capable torch, transformers, jsonschema and pytest from PyPI,
# and the exporter installed editable. Rebuilt only when the requirements change.
venv: $(VENV_OK)
$(VENV_OK): exporter/requirements.txt exporter/pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install --quiet -r exporter/requirements.txt
	$(PY) -m pip install --quiet --no-deps -e exporter
	touch $@

# Regenerate examples/dumps from ../shared/configs.
examples: $(VENV_OK)
	PY=$(PY) examples/generate.sh

bench: $(VENV_OK)
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin out
