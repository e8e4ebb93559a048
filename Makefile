# event-forwarding-proxy — two commands set everything up: `make run` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
PORT ?= 8080
SINK_ADDR ?= 127.0.0.1:8081
FUZZTIME ?= 1m

.PHONY: all build run test unit fuzz-short fuzz lint bench tidy-check tools clean

# Binaries the tests run (kube-apiserver, etcd), built from the pinned nested
# module test/tools and cached in the git-ignored .cache/bin.
TOOLS_BIN := $(CURDIR)/.cache/bin
TOOLS_MOD := test/tools/go.mod test/tools/go.sum
K8S_VERSION := v1.37.2
K8S_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37

all: build

build: ## build every command into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

run: build ## the proxy on :$(PORT) with loopback destinations allowed, and a sink on $(SINK_ADDR)
	@echo "Starting a sink on $(SINK_ADDR) and the proxy on :$(PORT) (Ctrl-C stops both)."
	@echo "Forward an event to the sink:"
	@echo "  curl -i localhost:$(PORT) -H 'Kn-Forward-To: http://$(SINK_ADDR)/' \\"
	@echo "    -H 'Ce-Specversion: 1.0' -H 'Ce-Id: 1' -H 'Ce-Source: /curl' -H 'Ce-Type: demo' \\"
	@echo "    -H 'Content-Type: application/json' -d '{\"hello\":\"world\"}'"
	@echo "Add -H 'Prefer: respond-async' for a 202 hand-off."
	@$(BIN)/sink -addr $(SINK_ADDR) & sink=$$!; trap 'kill $$sink 2>/dev/null' EXIT; \
	  PORT=$(PORT) FORWARD_ALLOWED_CIDRS=127.0.0.0/8 FORWARD_ALLOWED_HOSTS=localhost GODEBUG=adaptivestackstart=0 $(BIN)/proxy

test: lint tools unit fuzz-short ## everything CI runs

unit: tools
	$(GO) test -race -count=1 -timeout 20m ./...

# Each fuzz target briefly; `make fuzz FUZZTIME=5m` runs them longer.
# fuzz-short counts executions rather than seconds: a duration budget can
# fail with a bare "context deadline exceeded" when it expires under load
# (a race in Go's fuzz coordinator, golang/go#75804, fixed in Go 1.27).
fuzz-short: FUZZTIME := 10000x
fuzz-short fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzParseDuration$$' -fuzztime=$(FUZZTIME) ./delivery/
	$(GO) test -run='^$$' -fuzz='^FuzzParseDestination$$' -fuzztime=$(FUZZTIME) ./proxy/
	$(GO) test -run='^$$' -fuzz='^FuzzRetryAfter$$' -fuzztime=$(FUZZTIME) ./delivery/
	$(GO) test -run='^$$' -fuzz='^FuzzPrefersAsync$$' -fuzztime=$(FUZZTIME) ./proxy/
	$(GO) test -run='^$$' -fuzz='^FuzzForwardHeaders$$' -fuzztime=$(FUZZTIME) ./proxy/
	$(GO) test -run='^$$' -fuzz='^FuzzFraming$$' -fuzztime=$(FUZZTIME) ./proxy/
	$(GO) test -run='^$$' -fuzz='^FuzzDestinationPolicy$$' -fuzztime=$(FUZZTIME) ./proxy/
	$(GO) test -run='^$$' -fuzz='^FuzzSanitiseHeaders$$' -fuzztime=$(FUZZTIME) ./proxy/
	$(GO) test -run='^$$' -fuzz='^FuzzAnswer$$' -fuzztime=$(FUZZTIME) ./delivery/http1/
	$(GO) test -run='^$$' -fuzz='^FuzzHeaders$$' -fuzztime=$(FUZZTIME) ./delivery/h2c/
	$(GO) test -run='^$$' -fuzz='^FuzzAnswerFrames$$' -fuzztime=$(FUZZTIME) ./delivery/h2c/
	$(GO) test -run='^$$' -fuzz='^FuzzRequestFrames$$' -fuzztime=$(FUZZTIME) ./proxy/internal/h2server/

lint: tidy-check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if command -v golangci-lint >/dev/null; then golangci-lint run ./...; fi

tidy-check:
	$(GO) mod tidy -diff
	cd test/tools && $(GO) mod tidy -diff

tools: $(TOOLS_BIN)/kube-apiserver $(TOOLS_BIN)/etcd ## kube-apiserver and etcd for tests (cold: about 10 minutes)

$(TOOLS_BIN)/kube-apiserver: $(TOOLS_MOD)
	cd test/tools && $(GO) build -ldflags '$(K8S_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(TOOLS_BIN)/etcd: $(TOOLS_MOD)
	cd test/tools && $(GO) build -o $@ go.etcd.io/etcd/server/v3

# Prometheus and promtool for test/monitoring (Debian's prometheus package,
# 2.42), installed when either is missing; sudo only when not root.
.PHONY: prometheus-tools monitoring-rules
unit: prometheus-tools
prometheus-tools:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; \
	fi

# config/monitoring/prometheusrule.yaml, generated from rules.yaml (a test
# fails while they differ).
monitoring-rules:
	$(GO) test -count=1 -run '^TestPrometheusRuleIsGenerated$$' ./test/monitoring/ -update

# The scenario bench (cmd/loadgen, test/bench) runs after the Go benchmarks
# and rewrites docs/benchmarks.md's tables and docs/bench/. BENCH_SCALE=0.1
# shrinks it for a quick run; BENCH_N=1000,10000 picks the held calls over h2c.
BENCH_SCALE ?= 1
BENCH_N ?=
BENCH_CACHE := $(CURDIR)/.cache/bench

# nginx, the bench's third peer (Debian's nginx-light), installed when
# missing; if it cannot be installed, the bench runs without it.
.PHONY: bench-nginx
bench-nginx:
	@if [ ! -x /usr/sbin/nginx ]; then \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  ( $$sudo apt-get update && \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light ) || \
	  echo "nginx could not be installed: the bench runs without it"; \
	fi

bench: tools bench-nginx ## Go benchmarks of the hot path, then the scenario bench (docs/benchmarks.md)
	@mkdir -p $(BENCH_CACHE)
	set -o pipefail; $(GO) test -run='^$$' -bench=. -benchmem -count=1 ./proxy/ ./delivery/ ./delivery/http1/ ./delivery/h2c/ | tee $(BENCH_CACHE)/gobench.txt
	$(GO) build -o $(BIN)/ ./cmd/proxy ./cmd/loadgen
	$(BIN)/loadgen run -proxy $(BIN)/proxy -scale $(BENCH_SCALE) -n '$(BENCH_N)' -out docs/bench/results.json
	$(BIN)/loadgen report -in docs/bench/results.json -gobench $(BENCH_CACHE)/gobench.txt -doc docs/benchmarks.md -plots docs/bench
	$(GO) test -run='^$$' -bench=AdapterTick -benchtime=3x -timeout 20m ./test/sender/
	$(GO) test -run='^$$' -bench=Seed -benchtime=1x -timeout 30m ./test/mtping/

# The seed scenario in small, with a live view (about a minute, loopback
# only): DEMO_FLAGS='-sources 5000 -hold 30s' changes it ($(BIN)/demo -h).
.PHONY: demo
DEMO_FLAGS ?=

demo: ## the seed scenario in small, live: an adapter direct to slow sinks, then through the proxy
	$(GO) build -o $(BIN)/ ./cmd/proxy ./cmd/demo
	$(BIN)/demo -proxy $(BIN)/proxy $(DEMO_FLAGS)

clean:
	rm -rf $(BIN)
include test/cluster/cluster.mk
