# mrep: the two commands a fresh machine needs are `make demo` and `make test`.
SHELL := /bin/bash
PY      := .venv/bin/python
VENV_OK := .venv/.installed
GO      ?= go
DB      ?= out/mrep.db

.PHONY: demo test test-go test-py stress venv build examples reports bench clean postgres

# Main job: build mrep, ingest the bundled example dumps into the embedded SQLite
# database, list them, and write the full DeepSeek-V3 report on H200 FP8 to out/report.
demo: build
	@mkdir -p out
	./bin/mrep --db $(DB) ingest examples/dumps
	./bin/mrep --db $(DB) runs
	./bin/mrep --db $(DB) report DeepSeek-V3@base --chip H200 --chip B200 --dtype fp8 -b 8 -s 255 -o out/report
	@echo "open out/report/report.md"

build:
	$(GO) build -o bin/mrep ./cmd/mrep

# All tests: Go (store, ingest, cmd) and Python (exporter, schema fixtures).
test: test-go test-py

# The store's suite runs twice: on SQLite, and on a PostgreSQL server the tests start
# themselves (internal/pgtest); the PostgreSQL tests of cmd/mrep start one too. Without the
# server binaries they skip and say why, except under CI=…, where they fail.
# The default sizes finish in a few minutes on 2 cores; -timeout leaves headroom over the slowest
# package (cmd/mrep) so a loaded machine reports a slow test, not a panic at Go's 10-minute default.
TEST_TIMEOUT ?= 8m
test-go: postgres
	$(GO) vet ./...
	$(GO) test -timeout $(TEST_TIMEOUT) ./...
	MREP_TEST_BACKEND=postgres $(GO) test -timeout $(TEST_TIMEOUT) -count=1 ./store

# The stress sizes (MREP_STRESS=1): 200 rounds of 16 processes opening a new history, 16 x 50
# PostgreSQL writers, the leave-one-source-out and leave-one-model-out refits, and a minute of
# each fuzz target. A change to the store, the ingest path or the fitter runs this.
FUZZTIME ?= 1m
stress: postgres
	MREP_STRESS=1 $(GO) test -timeout 60m -count=1 ./...
	MREP_STRESS=1 MREP_TEST_BACKEND=postgres $(GO) test -timeout 30m -count=1 ./store
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# PostgreSQL's server binaries for those tests: the distribution's package, installed when
# missing and this is root on a Debian-like machine; otherwise a note (the tests then skip).
postgres:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ls /usr/pgsql-*/bin/initdb >/dev/null 2>&1; then \
		true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing PostgreSQL's server (Debian package postgresql) for the shared-history tests"; \
		(apt-get install -y -q postgresql >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q postgresql >/dev/null 2>&1)) || \
			echo "note: could not install postgresql; its tests will skip"; \
	else \
		echo "note: no PostgreSQL server binaries (install the postgresql package); its tests will skip"; \
	fi

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

# Regenerate examples/dumps from examples/configs.
examples: $(VENV_OK)
	PY=$(PY) examples/generate.sh

# Regenerate the committed example reports and the side-by-side with the seed example.
reports: export SOURCE_DATE_EPOCH = 1767225600
reports: build
	@rm -rf out/reports.db && mkdir -p out
	@# the committed reports are this target's own output: written anew (mrep never overwrites a
	@# directory it cannot tell it wrote)
	rm -rf examples/reports/deepseek-v3-h200-fp8 examples/reports/llama-3.1-8b-h100-bf16
	./bin/mrep --db out/reports.db ingest examples/dumps/DeepSeek-V3.json.gz examples/dumps/Llama-3.1-8B.json.gz
	./bin/mrep --db out/reports.db report DeepSeek-V3 --chip H200 --chip B200 --dtype fp8 -b 8 -s 255 -o examples/reports/deepseek-v3-h200-fp8
	./bin/mrep --db out/reports.db report Llama-3.1-8B --chip H100 --chip A100 --chip MI300X -b 8 -s 2048 -o examples/reports/llama-3.1-8b-h100-bf16
	$(GO) run ./internal/seedcompare -o examples/reports/COMPARISON.md

bench: $(VENV_OK)
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin out
