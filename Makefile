# event-forwarding-proxy — two commands set everything up: `make run` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
PORT ?= 8080
SINK_ADDR ?= 127.0.0.1:8081
FUZZTIME ?= 1m

.PHONY: all build run test unit integration fuzz-short fuzz lint bench tidy-check shellcheck-tool tools clean

# Binaries the tests run (kube-apiserver, etcd), built from the pinned nested
# module test/tools and cached in the git-ignored .cache/bin.
TOOLS_BIN := $(CURDIR)/.cache/bin
TOOLS_MOD := test/tools/go.mod test/tools/go.sum
K8S_VERSION := v1.37.2
K8S_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37

include hack/static-build.mk

all: build

# Content stamps: $(STAMPS)/NAME holds the hash of the files STAMP_NAME
# lists, rewritten only when it changes (hack/stamp.sh). The builds of
# pinned modules and of the cluster's programs depend on their stamp, not
# on the files, so a fresh clone with .cache kept rebuilds nothing whose
# inputs did not change.
STAMPS := $(CURDIR)/.cache/stamps
.PHONY: FORCE
FORCE:
$(STAMPS)/%: FORCE
	@hack/stamp.sh $@ $(STAMP_$*)

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

# make test runs in two lanes side by side after a common start: the
# checks (lint, unit, integration, fuzz, h2spec) need no cluster, and the
# cluster's lane (build, start, scenarios, stop) mostly waits on the node.
# Both lanes' lines stream, each behind its phase's name; the run ends
# with a table of the phases and their times (hack/phase.sh). The start
# installs packages and builds the tools both lanes use, so that no two
# apt-get or go build of one file run at once.
PHASE := $(CURDIR)/hack/phase.sh run
PHASES_FILE := $(CURDIR)/.cache/phases.tsv
.PHONY: test-start test-checks
test: ## everything CI runs, in two lanes; ends with a table of its phases
	@mkdir -p $(dir $(PHASES_FILE)) && : >$(PHASES_FILE)
	@export PHASES_FILE=$(PHASES_FILE); \
	$(PHASE) start $(MAKE) --no-print-directory test-start && \
	$(MAKE) --no-print-directory -j2 test-checks cluster-test; rc=$$?; \
	$(CURDIR)/hack/phase.sh table; exit $$rc

test-start: cluster-deps prometheus-tools bench-haproxy shellcheck-tool tools

# The integration tests wait mostly on the processes they start; lint,
# fuzz and h2spec run beside them. What asserts nothing about time runs at
# the lowest CPU priority (nice 19): lint, fuzz, and the compile of what
# the unit and integration tests build (test-compile). Lint stays off the
# way to the integration tests, the checks' longest phase: on a cold
# machine it builds golangci-lint and analyses every package, minutes of
# CPU that it takes from what the other phases leave. The cluster's lane
# is the longer one: on a cold machine it compiles for most of its first
# half, and until its scenarios wait on the HPA the node's control plane
# needs both cores; the checks' lane takes what they leave.
.PHONY: test-integration-phase test-static-phase test-compile
test-checks:
	@$(PHASE) compile nice -n 19 $(MAKE) --no-print-directory test-compile
	@$(PHASE) unit $(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory -j2 test-integration-phase test-static-phase

test-integration-phase:
	@$(PHASE) integration $(MAKE) --no-print-directory integration

test-static-phase:
	@$(PHASE) lint nice -n 19 $(MAKE) --no-print-directory lint
	@$(PHASE) fuzz nice -n 19 $(MAKE) --no-print-directory fuzz-short
	@$(PHASE) h2spec $(MAKE) --no-print-directory h2spec

# What the unit and integration tests compile, compiled ahead: the
# packages and their dependencies with the race detector, and the
# release's arm64 binaries, which TestRelease builds (the cluster's lane
# builds the amd64 ones). The tests then find them in Go's build cache.
test-compile:
	$(GO) build -race ./...
	$(GO) build -race -tags $(UNIT_TAGS) ./...
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath ./cmd/proxy ./cmd/mtping

# The quick loop: every unit test, as `go test ./...` on a fresh clone runs
# them (no tools, no processes), with Go's test cache on: a package whose
# test binary and inputs did not change is not run again. The boundaries
# test reads the packages' imports through `go list`, which the cache
# cannot see, so it always runs, and only once.
# PKG narrows it to some packages (make unit PKG=./proxy/...). The tag
# h2debug makes the HTTP/2 ends check that what their read loop owns is
# touched on it alone (internal/h2conn's ReadLoop): a panic otherwise.
PKG ?= ./...
UNIT_TAGS := h2debug
BOUNDARIES_PKG := knative.dev/event-forwarding-proxy/test/boundaries
unit: ## unit tests, with the race detector (PKG=./proxy/... for some)
	@pkgs=$$($(GO) list $(PKG)) || exit 1; \
	rest=$$(echo "$$pkgs" | grep -vx $(BOUNDARIES_PKG) || true); \
	if [ -n "$$rest" ]; then echo "$(GO) test -race -tags $(UNIT_TAGS) -timeout 20m ($(PKG))"; $(GO) test -race -tags $(UNIT_TAGS) -timeout 20m $$rest || exit 1; fi; \
	if echo "$$pkgs" | grep -qx $(BOUNDARIES_PKG); then echo "$(GO) test -race -count=1 ./test/boundaries/"; $(GO) test -race -count=1 ./test/boundaries/; fi

# Tests that need kube-apiserver and etcd (tools), Prometheus and promtool
# (prometheus-tools), or build the project's binaries and run them as
# processes carry the build tag `integration`. Only the packages holding
# such files run here: the other packages' tests ran in `make unit`.
# go test runs INTEGRATION_PARALLEL packages at a time, more than the
# cores, since they mostly wait on the processes they start, in the order
# given: the longest (INTEGRATION_FIRST) start first, so that the others
# fill the other lanes while they run.
INTEGRATION_FIRST = ./test/mtping ./test/bench/load
INTEGRATION_PKGS = $(INTEGRATION_FIRST) $(filter-out $(INTEGRATION_FIRST),$(shell git ls-files -co --exclude-standard -- '*_test.go' | \
	xargs grep -lE '^//go:build .*\bintegration\b' | xargs -n1 dirname | sort -u | sed 's|^|./|'))

INTEGRATION_PARALLEL ?= 3

integration: tools prometheus-tools bench-haproxy ## tests behind the integration build tag
	$(GO) test -race -count=1 -timeout 20m -p $(INTEGRATION_PARALLEL) -tags integration $(INTEGRATION_PKGS)

# h2spec against the inbound HTTP/2 server (proxy/internal/h2server's
# TestH2Spec, build tag h2spec), with the race detector as the unit tests.
# Every one of its 145 cases must pass, none skipped, but the one allowed
# (h2specAllowed, next to the h2spec call in the test): 3.5/2, an invalid
# connection preface, because the port serves HTTP/1.1 too, as Go's own
# server does, and takes such bytes for an HTTP/1.1 request (400).
.PHONY: h2spec
h2spec: $(TOOLS_BIN)/h2spec ## the HTTP/2 conformance suite against the inbound server
	$(GO) test -race -count=1 -tags h2spec -run '^TestH2Spec$$' ./proxy/internal/h2server/

# Each fuzz target briefly; `make fuzz FUZZTIME=5m` runs them longer.
# fuzz-short counts executions rather than seconds: a duration budget can
# fail with a bare "context deadline exceeded" when it expires under load
# (a race in Go's fuzz coordinator, golang/go#75804, fixed in Go 1.27).
# The targets are found, not listed: the packages whose test files declare
# a Fuzz function. Each package's test binary is built once, instrumented
# for fuzzing (go test -c -fuzz), lists its targets and runs each alone,
# in the package's directory as go test would (new failing inputs go to
# its testdata/fuzz, interesting ones to Go's fuzz cache); a go test per
# target would link the binary again each time. The first failure stops
# the run.
fuzz-short: FUZZTIME := 10000x
fuzz-short fuzz:
	@set -euo pipefail; \
	pkgs=$$(git grep --untracked -l '^func Fuzz' -- '*_test.go' | xargs -r -n1 dirname | sort -u); \
	if [ -z "$$pkgs" ]; then echo "no fuzz targets found" >&2; exit 1; fi; \
	bins=$$(mktemp -d); trap 'rm -rf "$$bins"' EXIT; \
	cache=$$($(GO) env GOCACHE)/fuzz; targets=0; \
	for dir in $$pkgs; do \
	  pkg=$$($(GO) list ./$$dir); bin=$$bins/$$(echo $$dir | tr / _).test; \
	  $(GO) test -c -fuzz=. -o $$bin ./$$dir; \
	  for name in $$(cd $$dir && $$bin -test.list '^Fuzz'); do \
	    targets=$$((targets + 1)); \
	    echo "$$pkg: $$name, $(FUZZTIME)"; \
	    (cd $$dir && $$bin -test.paniconexit0 -test.run='^$$' -test.fuzz="^$$name\$$" -test.fuzztime=$(FUZZTIME) \
	      -test.fuzzcachedir=$$cache/$$pkg); \
	  done; \
	done; \
	if [ $$targets -eq 0 ]; then echo "no fuzz targets found" >&2; exit 1; fi; \
	echo "fuzz: $$targets targets passed, $(FUZZTIME) each"

# golangci-lint at a pinned version, built once into .cache/bin (cold: a
# few minutes), static and -trimpath as the other tools are (their
# standard library compiles once); .golangci.yaml says which linters run
# and why.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLS_BIN)/golangci-lint

$(GOLANGCI_LINT):
	CGO_ENABLED=0 GOBIN=$(TOOLS_BIN) $(GO) install -trimpath github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# Vet and golangci-lint see the integration-, h2spec- and cluster-tagged
# files too. Both compile every dependency for its type information (vet
# itself, golangci-lint through go list -export): with the release's
# flags (static, -trimpath) those compiles are one set, the one the
# release and the cluster's heartbeats image reuse. A cold make test
# spent 10 CPU-minutes in golangci-lint's go list on a set of its own.
lint: tidy-check $(GOLANGCI_LINT) shellcheck-tool ## gofmt, go vet, golangci-lint and shellcheck; fails on any finding
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	shellcheck $(SHELL_SCRIPTS)
	CGO_ENABLED=0 $(GO) vet -trimpath -tags integration,h2spec,cluster,h2debug ./...
	@v=$$($(GOLANGCI_LINT) version --short); if [ "v$$v" != "$(GOLANGCI_LINT_VERSION)" ]; then \
	  echo "$(GOLANGCI_LINT) is v$$v, want $(GOLANGCI_LINT_VERSION): remove it and run make lint again"; exit 1; fi
	CGO_ENABLED=0 GOFLAGS=-trimpath $(GOLANGCI_LINT) run ./...

# Every shell script: the .sh files and .ci/run. .shellcheckrc lets
# shellcheck follow what they source.
SHELL_SCRIPTS = $(shell git ls-files '*.sh') .ci/run

# shellcheck (Debian's package, 0.9) for make lint, installed when missing;
# sudo only when not root.
shellcheck-tool:
	@if ! command -v shellcheck >/dev/null; then \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends shellcheck; \
	fi

tidy-check:
	$(GO) mod tidy -diff
	cd test/tools && $(GO) mod tidy -diff
	cd test/tools/h2spec && $(GO) mod tidy -diff

tools: $(TOOLS_BIN)/kube-apiserver $(TOOLS_BIN)/etcd $(TOOLS_BIN)/kubectl ## kube-apiserver, etcd and kubectl for tests (cold: about 10 minutes)

# kube-apiserver and kubectl in one go build: it links one while it
# compiles the other. kubectl runs docs/install.md's preflight in the
# integration tests, and the cluster's scripts.
STAMP_tools = $(TOOLS_MOD) $(STATIC_BUILD_MK)
$(TOOLS_BIN)/kube-apiserver $(TOOLS_BIN)/kubectl &: $(STAMPS)/tools
	cd test/tools && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS) $(K8S_LDFLAGS)' -o $(TOOLS_BIN)/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
	touch $(TOOLS_BIN)/kube-apiserver $(TOOLS_BIN)/kubectl

$(TOOLS_BIN)/etcd: $(STAMPS)/tools
	cd test/tools && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $@ go.etcd.io/etcd/server/v3

# The release (docs/install.md): release/ holds one YAML per profile with
# the images by digest, their OCI archives (linux/amd64 and arm64), the
# config-leader-election patch, the Prometheus Adapter rule and SHA256SUMS.
# RELEASE_REGISTRY is where the images will be pushed; the default,
# dev.local, is the test cluster's (it imports the archives).
# IMGTAR is defined before the rules that name it: make reads a rule's
# prerequisites as it meets the rule.
IMGTAR := $(TOOLS_BIN)/imgtar
RELEASE_REGISTRY ?= dev.local
RELEASE_PLATFORMS ?= linux/amd64,linux/arm64
.PHONY: release
# VERSION=vX.Y.Z on the command line names a release, which CHANGELOG.md
# must describe; without it, the tree's git describe.
release: $(IMGTAR) ## release/: one YAML per profile, images by digest (VERSION=vX.Y.Z for a named one)
	RELEASE_VERSION=$(if $(filter command line,$(origin VERSION)),$(VERSION)) RELEASE_REGISTRY=$(RELEASE_REGISTRY) RELEASE_PLATFORMS=$(RELEASE_PLATFORMS) IMGTAR=$(IMGTAR) hack/release.sh

# The image-archive writer of the release and the cluster's images.
STAMP_imgtar = $(wildcard hack/imgtar/*.go) $(STATIC_BUILD_MK)
$(IMGTAR): $(STAMPS)/imgtar
	$(STATIC_GO_BUILD) -o $@ ./hack/imgtar

STAMP_h2spec = test/tools/h2spec/go.mod test/tools/h2spec/go.sum $(STATIC_BUILD_MK)
$(TOOLS_BIN)/h2spec: $(STAMPS)/h2spec
	cd test/tools/h2spec && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $@ github.com/summerwind/h2spec/cmd/h2spec

# Prometheus and promtool for test/monitoring (Debian's prometheus package,
# 2.42), installed when either is missing; sudo only when not root.
.PHONY: prometheus-tools monitoring-rules
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

# HAProxy, the bench's event-loop peer (Debian's haproxy), installed when
# missing. The bench compares the proxy with it, and `make integration`
# runs the bench's HAProxy configuration, so both need it.
.PHONY: bench-haproxy
bench-haproxy:
	@if [ ! -x /usr/sbin/haproxy ]; then \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy; \
	fi

bench: tools bench-nginx bench-haproxy ## Go benchmarks of the hot path, then the scenario bench (docs/benchmarks.md)
	set -o pipefail; $(GO) test -run='^$$' -bench=. -benchmem -count=1 ./proxy/ ./delivery/ ./delivery/http1/ ./delivery/h2c/ ./adapter/ | tee docs/bench/gobench.txt
	$(GO) build -o $(BIN)/ ./cmd/proxy ./cmd/loadgen
	$(BIN)/loadgen run -proxy $(BIN)/proxy -scale $(BENCH_SCALE) -n '$(BENCH_N)' -out docs/bench/results.json
	$(BIN)/loadgen report -in docs/bench/results.json -gobench docs/bench/gobench.txt -doc docs/benchmarks.md -plots docs/bench
	$(GO) test -tags integration -run='^$$' -bench=AdapterTick -benchtime=3x -timeout 20m ./test/sender/
	$(GO) test -tags integration -run='^$$' -bench=Seed -benchtime=1x -timeout 30m ./test/mtping/

# The seed scenario in small, with a live view (about a minute, loopback
# only): DEMO_FLAGS='-sources 5000 -hold 30s' changes it ($(BIN)/demo -h).
.PHONY: demo
DEMO_FLAGS ?=

demo: ## the seed scenario in small, live: an adapter direct to slow sinks, then through the proxy
	$(GO) build -o $(BIN)/ ./cmd/proxy ./cmd/demo
	$(BIN)/demo -proxy $(BIN)/proxy $(DEMO_FLAGS)

clean:
	rm -rf $(BIN)

# The unit and integration suites STRESS_RUNS times beside STRESS_LOAD
# busy loops (hack/stress.sh): a test that assumes how soon something
# happens passes on an idle machine and fails on a loaded CI one; here it
# fails first. Run it before landing a change to a test's waits.
STRESS_RUNS ?= 10
STRESS_LOAD ?= 2
.PHONY: stress
stress: tools prometheus-tools bench-haproxy ## the unit and integration suites STRESS_RUNS times (10) beside STRESS_LOAD busy loops (2)
	STRESS_RUNS=$(STRESS_RUNS) STRESS_LOAD=$(STRESS_LOAD) GO=$(GO) INTEGRATION_PKGS='$(INTEGRATION_PKGS)' UNIT_TAGS=$(UNIT_TAGS) \
	  INTEGRATION_PARALLEL=$(INTEGRATION_PARALLEL) hack/stress.sh

include test/cluster/cluster.mk
