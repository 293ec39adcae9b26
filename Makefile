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
# bpftool) and the Intel event tables from the pinned perfmon subset
# (collector/pmu/perfmon); the vendored ECharts refresh is separate: web
# assets are refreshed with heatmap/assets/refresh.sh.
generate:
	$(GO) generate ./bpf/... ./collector

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

# Records the rcu workload's bad variant (a read-mostly config behind a
# lock) and its good one (RCU-style), in software mode as on any VM,
# writes both reports and the diff of the two, and says what to open.
# On a host with a hardware PMU it records falseshare as well, whose
# cache-line contention only a PMU can see. About 20 s on 2 CPUs.
DEMO_REC := $(BIN) record -q -i 250ms -d 5s
demo: build
	@mkdir -p out
	@$(BIN) caps | tail -1
	$(DEMO_REC) -o out/rcu-bad.rec -- $(BIN) workload run rcu --variant bad -d 5s
	$(DEMO_REC) -o out/rcu-good.rec -- $(BIN) workload run rcu --variant good -d 5s
	@$(BIN) report out/rcu-bad.rec -o out/rcu-bad.html >/dev/null
	@$(BIN) report out/rcu-good.rec -o out/rcu-good.html >/dev/null
	@$(BIN) diff out/rcu-bad.rec out/rcu-good.rec -o out/rcu-diff.html > out/rcu-diff.txt; \
	  rc=$$?; if [ $$rc -gt 1 ]; then exit $$rc; fi
	@if $(BIN) caps --json | grep -q '"mode": "hardware"'; then \
	  $(DEMO_REC) -o out/falseshare-bad.rec -- $(BIN) workload run falseshare --variant bad -d 5s && \
	  $(BIN) report out/falseshare-bad.rec -o out/falseshare-bad.html >/dev/null && \
	  echo "  $(CURDIR)/out/falseshare-bad.html  false sharing, seen by the PMU"; fi
	@echo
	@echo "rcu bad, findings:"; $(BIN) analyze out/rcu-bad.rec | grep -E '^  \[' || true
	@echo "rcu bad -> good, diff: $$(tail -1 out/rcu-diff.txt)"
	@echo "Open first:  $(CURDIR)/out/rcu-bad.html   (findings, then the per-core heatmap and the flame graph)"
	@echo "then:        $(CURDIR)/out/rcu-diff.html  (bad -> good: what the fix changed, with significance)"
	@echo "and:         $(CURDIR)/out/rcu-good.html"
