# Set-up, build, run and test for canvas bridge. Every target installs what it is missing.

SWIFT        ?= swift
# libzmq, Cairo and libqpdf are linked through system-library targets; qpdf and poppler-utils
# verify PDFs in tests; the DejaVu fonts are embedded in flattened text.
APT_PACKAGES := pkg-config libzmq3-dev libcairo2-dev libqpdf-dev qpdf poppler-utils fonts-dejavu-core
DOCUMENTS    ?= documents

.PHONY: all deps system-deps build run test test-swift bench clean

all: build

deps: system-deps

system-deps:
	@scripts/install-system-deps.sh $(APT_PACKAGES)

build: deps
	$(SWIFT) build

run: build
	@mkdir -p $(DOCUMENTS)
	$(SWIFT) run canvasd

test: test-swift

test-swift: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test

bench: build
	@echo "no benchmarks yet"

clean:
	rm -rf .build
