# Set-up, build, run, test and benchmark canvas bridge. Every target installs what it is missing.

SWIFT        ?= swift
PYTHON3      ?= python3
# libzmq, Cairo and libqpdf are linked through system-library targets; qpdf, poppler-utils and
# mupdf-tools verify and render PDFs in tests (MuPDF also edits ink as another program would);
# the DejaVu fonts are embedded in flattened text. The web layer: pdf.js
# for the demo page, headless Chromium and its driver for the browser tests, TypeScript to check
# the client's .d.ts. hiredis, redis-server and haproxy run several instances behind one address
# (make cluster, the cluster tests). e2fsprogs' chattr makes a file even root cannot cut (a test of
# a prune that fails). GlusterFS's server and FUSE client make a replicated volume on this
# machine, mounted once per instance as separate machines mount it (test_glusterfs.py,
# bench-glusterfs, make cluster GLUSTERFS=1); the tests start glusterd themselves.
APT_PACKAGES := pkg-config libzmq3-dev libcairo2-dev libqpdf-dev libssl-dev qpdf poppler-utils mupdf-tools fonts-dejavu-core \
                libjs-pdf chromium-headless-shell chromium-driver node-typescript libhiredis-dev redis-server haproxy e2fsprogs \
                glusterfs-server glusterfs-client
DOCUMENTS    ?= documents
VENV         := .venv
PYTHON       := $(VENV)/bin/python
CANVASD      := $(CURDIR)/.build/debug/canvasd
# Where canvasd listens (the names canvasctl reads from the environment too), where web pages
# reach it (ws://, loopback) and where the demo page is served: `make run DEMO_PORT=8680`.
CANVAS_ENDPOINT ?= tcp://127.0.0.1:5555
CANVAS_EVENTS   ?= tcp://127.0.0.1:5556
WEB_ENDPOINT ?= ws://127.0.0.1:5580
WEB_EVENTS   ?= ws://127.0.0.1:5581
DEMO_PORT    ?= 8580
# make cluster's own ports, beside make run's: HAProxy's three and Redis's from CLUSTER_PORTS on,
# each canvasd's five at CLUSTER_PORTS + 10, + 20, + 30 (40 ports in all), and its demo page;
# and its own document folder, so that it never shares make run's.
CLUSTER_PORTS     ?= 6500
CLUSTER_DEMO_PORT ?= 8590
CLUSTER_DOCUMENTS ?= cluster-documents

.PHONY: all deps system-deps python-deps build run sample-document test test-swift test-python test-web-types bench bench-cluster bench-glusterfs xopp-cost cluster fuzz clean

all: build

deps: system-deps python-deps

system-deps:
	@scripts/install-system-deps.sh $(APT_PACKAGES)

# The Python client, installed editable with its test tools (pyzmq, pytest, Hypothesis, jsonschema).
python-deps: $(VENV)/.installed

$(VENV)/.installed: clients/python/pyproject.toml
	$(PYTHON3) -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	@# setuptools warns about editable installs on stderr whatever pip's -q says; nothing to act on.
	PYTHONWARNINGS=ignore $(PYTHON) -m pip install -q -e 'clients/python[test]'
	@touch $@

# `swift build` only when a source is newer than the last build: with nothing changed, `make run`
# goes straight to starting canvasd. Swift Package Manager's own check, even when it finds nothing
# to do, takes seconds on a loaded machine (15.7 s was seen).
SWIFT_SOURCES := Package.swift $(shell find Sources -type f)
BUILD_STAMP  ?= .build/debug/.make-build-stamp

build: $(BUILD_STAMP)

$(BUILD_STAMP): $(SWIFT_SOURCES) | system-deps
	$(SWIFT) build
	@mkdir -p $(dir $@) && touch $@

# canvasd in the foreground, and beside it the demo page's static server on loopback; the
# address to open is printed first. The server script checks every port first (every port in
# use is named in one message, each with the variable that moves it, and nothing starts) and lives
# exactly as long as canvasd.
run: build sample-document
	@$(PYTHON3) scripts/web-server.py --port $(DEMO_PORT) --web-endpoint $(WEB_ENDPOINT) --web-events $(WEB_EVENTS) -- \
	  $(CANVASD) --documents $(DOCUMENTS) --endpoint $(CANVAS_ENDPOINT) --events $(CANVAS_EVENTS) \
	  --web-endpoint $(WEB_ENDPOINT) --web-events $(WEB_EVENTS)

# A first document to draw on: samples/notes.pdf, unless the folder already has a notes.pdf
# (which is then the user's and is never replaced).
sample-document:
	@mkdir -p $(DOCUMENTS)
	@test -e $(DOCUMENTS)/notes.pdf || cp samples/notes.pdf $(DOCUMENTS)/notes.pdf

test: test-swift test-web-types test-python

# The JavaScript client's declarations, checked with Debian's TypeScript (no npm).
test-web-types: system-deps
	cd clients/web && tsc -p tsconfig.json

# The tests' folders (a few hundred a run) go in a scratch folder of the run's own, removed when
# every test passed and kept, and named, when one failed.
test-swift: system-deps
	$(SWIFT) build --build-tests
	@scratch=$$(mktemp -d /tmp/canvas-swift-tests.XXXXXX) && \
	  if TMPDIR=$$scratch $(SWIFT) test; then rm -rf $$scratch; \
	  else echo "the tests' folders are kept in $$scratch"; exit 1; fi

test-python: build python-deps
	CANVASD=$(CANVASD) $(PYTHON) -m pytest -q clients/python/tests

bench: system-deps python-deps
	$(SWIFT) build -c release
	.build/release/canvasbench latency
	.build/release/canvasbench web
	.build/release/canvasbench flatten
	.build/release/canvasbench load
	.build/release/canvasbench load --curve
	.build/release/canvasbench session-store
	.build/release/canvasbench stroke-cost
	.build/release/canvasbench save-cost
	$(PYTHON) scripts/bench-glusterfs.py --canvasd .build/release/canvasd

# A save into a GlusterFS mount against the same save on the local disk, in one run.
bench-glusterfs: system-deps python-deps
	$(SWIFT) build -c release --product canvasd
	$(PYTHON) scripts/bench-glusterfs.py --canvasd .build/release/canvasd

# What a Xournal++ page (XOPP=notes.xopp, its first page with strokes) costs saved by canvasd,
# as paper and as annotations, beside the .xopp file's own bytes a point; each reopened exactly.
xopp-cost: python-deps
	@test -n "$(XOPP)" || { echo "make xopp-cost XOPP=path/to/file.xopp"; exit 2; }
	$(SWIFT) build -c release --product canvasd
	$(PYTHON) scripts/xopp-cost.py "$(XOPP)" --canvasd .build/release/canvasd

# Redis, three canvasd instances and HAProxy (deploy/haproxy.cfg for ZMTP, haproxy-ws.cfg for
# ws://) on loopback, serving $(CLUSTER_DOCUMENTS) together (a folder of its own, not make run's
# $(DOCUMENTS); it starts with the same sample notes.pdf), and the demo page on CLUSTER_DEMO_PORT
# reaching them through HAProxy; prints the addresses, Ctrl-C stops them all. Every port is
# checked first: every port in use is named at once, with the variable that moves it, and
# nothing starts. With GLUSTERFS=1 the instances share no local folder: each serves its own mount
# of a GlusterFS volume made for the run (deleted, with what was saved there, when it stops).
# With SENTINEL=1 Redis is a primary, two replicas and three sentinels, and each change waits for
# one replica (kill the primary: a replica is promoted, the instances follow it).
cluster: build python-deps
	@$(MAKE) -s --no-print-directory sample-document DOCUMENTS=$(CLUSTER_DOCUMENTS)
	@$(PYTHON) scripts/cluster.py --instances 3 --documents $(CLUSTER_DOCUMENTS) --canvasd $(CANVASD) \
	  --ports $(CLUSTER_PORTS) --demo-port $(CLUSTER_DEMO_PORT) $(if $(GLUSTERFS),--glusterfs) $(if $(SENTINEL),--sentinel)

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
