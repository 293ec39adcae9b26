# cacheheat: see README.md. `make demo` and `make test` are the two set-up
# commands; CI (.ci/run) runs `make test` from a clean clone.
GO      ?= go
BIN     := bin/cacheheat
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.Version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build generate test lint bench demo fuzz clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/cacheheat

# Regenerates the BPF objects and bindings (needs clang, llvm, libbpf-dev,
# bpftool) and the vendored ECharts refresh is separate: web assets are
# refreshed with heatmap/assets/refresh.sh.
generate:
	$(GO) generate ./bpf/...

# Tests that need root, BPF or Chromium run here as root and skip elsewhere
# with a message naming what is missing. Packages run one at a time (-p 1):
# the end-to-end tests record real workloads, and a neighbouring package's
# tests would be the noisy neighbour they measure.
test: build
	$(GO) test -p 1 -count=1 -timeout 15m ./...
	$(GO) test -race -count=1 -timeout 5m ./workloads/...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

fuzz:
	$(GO) test ./profile -run '^$$' -fuzz '^FuzzRead$$' -fuzztime 5m
	$(GO) test ./profile -run '^$$' -fuzz '^FuzzReadV2$$' -fuzztime 5m

bench: build
	bash bench/workloads.sh
	bash bench/overhead.sh
	bash bench/report.sh
	bash bench/diff.sh

# Records a bundled workload for about 10 s and writes an HTML report.
demo: build
	@mkdir -p out
	$(BIN) caps
	$(BIN) record -d 10s -o out/demo.rec -- $(BIN) workload run falseshare -t 2 -d 10s
	$(BIN) inspect out/demo.rec
	@$(BIN) report out/demo.rec -o out/demo.html >/dev/null
	@echo "report: $(CURDIR)/out/demo.html"
