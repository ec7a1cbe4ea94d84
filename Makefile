# Set-up, build, run, test and benchmark canvas bridge. Every target installs what it is missing.

SWIFT        ?= swift
PYTHON3      ?= python3
# libzmq, Cairo and libqpdf are linked through system-library targets; qpdf and poppler-utils
# verify PDFs in tests; the DejaVu fonts are embedded in flattened text; hiredis, redis-server and
# haproxy run several instances behind one address (make cluster, the cluster tests).
APT_PACKAGES := pkg-config libzmq3-dev libcairo2-dev libqpdf-dev libssl-dev qpdf poppler-utils fonts-dejavu-core \
                libhiredis-dev redis-server haproxy
DOCUMENTS    ?= documents
VENV         := .venv
PYTHON       := $(VENV)/bin/python
CANVASD      := $(CURDIR)/.build/debug/canvasd

.PHONY: all deps system-deps python-deps build run sample-document test test-swift test-python bench bench-cluster cluster fuzz clean

all: build

deps: system-deps python-deps

system-deps:
	@scripts/install-system-deps.sh $(APT_PACKAGES)

# The Python client, installed editable with its test tools (pyzmq, pytest, Hypothesis, jsonschema).
python-deps: $(VENV)/.installed

$(VENV)/.installed: clients/python/pyproject.toml
	$(PYTHON3) -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e 'clients/python[test]'
	@touch $@

build: system-deps
	$(SWIFT) build

run: build sample-document
	$(CANVASD) --documents $(DOCUMENTS)

# A first document to draw on: samples/notes.pdf, unless the folder already has a notes.pdf
# (which is then the user's and is never replaced).
sample-document:
	@mkdir -p $(DOCUMENTS)
	@test -e $(DOCUMENTS)/notes.pdf || cp samples/notes.pdf $(DOCUMENTS)/notes.pdf

test: test-swift test-python

test-swift: system-deps
	$(SWIFT) build --build-tests
	$(SWIFT) test

test-python: build python-deps
	CANVASD=$(CANVASD) $(PYTHON) -m pytest -q clients/python/tests

bench: system-deps
	$(SWIFT) build -c release
	.build/release/canvasbench latency
	.build/release/canvasbench flatten
	.build/release/canvasbench load
	.build/release/canvasbench load --curve

# Redis, three canvasd instances and HAProxy (deploy/haproxy.cfg) on loopback, serving
# $(DOCUMENTS) together; prints the addresses, Ctrl-C stops them all.
cluster: build python-deps sample-document
	$(PYTHON) scripts/cluster.py --instances 3 --documents $(DOCUMENTS) --canvasd $(CANVASD)

# The round trip without and with --session-store, and canvasbench load through HAProxy in front
# of 1 and of 3 instances.
bench-cluster: system-deps python-deps
	$(SWIFT) build -c release
	$(PYTHON) scripts/bench-cluster.py --build .build/release

# libFuzzer with address sanitizer over the request decoder and dispatcher, the drawing validator
# and the .yianazip reader; FUZZ_SECONDS per target (default 60).
fuzz: system-deps
	scripts/fuzz.sh

clean:
	rm -rf .build .build-fuzz $(VENV)
