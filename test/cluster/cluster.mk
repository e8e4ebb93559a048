# The one-node Kubernetes + Knative cluster (test/cluster/README.md):
# `make cluster-up`, `make cluster-down`. Binaries are built into
# .cache/cluster/bin and image archives into .cache/cluster/images, each
# again only when the content of its module's go.mod/go.sum (the pins) or
# of its sources changes (content stamps, Makefile).
.PHONY: cluster-build cluster-start cluster-up cluster-down cluster-deps cluster-bins cluster-images \
	cluster-serving-bins cluster-serving-images cluster-eventing-bins cluster-eventing-images \
	cluster-monitoring-bins cluster-monitoring-images

CLUSTER_DIR := $(CURDIR)/test/cluster
CLUSTER_BIN := $(CURDIR)/.cache/cluster/bin
CLUSTER_IMAGES := $(CURDIR)/.cache/cluster/images
COREDNS_MOD := test/cluster/coredns/go.mod test/cluster/coredns/go.sum
# Versions named in image tags come from the modules' own pins.
modversion = $(shell cd $(1) && $(GO) list -m -f '{{.Version}}' $(2))

cluster-build: cluster-deps cluster-bins cluster-images cluster-release ## the cluster's binaries and images, and the release, without starting anything

# The release the cluster installs (release/, as docs/install.md names
# it), for the node's platform only: the other's binaries would cost a
# cold build minutes of compiling that the node never runs. TestRelease
# builds and checks the release of every platform, as make release makes it.
.PHONY: cluster-release
cluster-release:
	@$(MAKE) --no-print-directory release RELEASE_PLATFORMS=linux/$(shell $(GO) env GOARCH)

cluster-up: cluster-build ## a one-node Kubernetes + Knative cluster (.cache/cluster/kubeconfig)
	@$(MAKE) --no-print-directory cluster-start

# cluster-up without its build, for make test's phases.
cluster-start:
	$(CLUSTER_DIR)/up.sh
	$(CLUSTER_DIR)/start.sh

cluster-down: ## stop the cluster and undo everything cluster-up did to the machine
	$(CLUSTER_DIR)/down.sh

# Debian's container runtime, CNI plugins, iptables (nftables to remove
# the empty tables iptables-nft leaves), Prometheus, and curl (which
# docs/install.md's check runs), when missing.
cluster-deps:
	@missing=; for p in containerd runc containernetworking-plugins iptables nftables prometheus curl; do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi

CLUSTER_K8S := kubelet kube-proxy kube-controller-manager kube-scheduler
CLUSTER_SMALL := pause probe hello podsd e2esink
cluster-bins: cluster-serving-bins cluster-eventing-bins cluster-monitoring-bins $(TOOLS_BIN)/kube-apiserver $(TOOLS_BIN)/etcd $(CLUSTER_K8S:%=$(CLUSTER_BIN)/%) $(CLUSTER_BIN)/kubectl \
	$(CLUSTER_BIN)/coredns $(CLUSTER_BIN)/coredns.version $(CLUSTER_SMALL:%=$(CLUSTER_BIN)/%) $(IMGTAR)

# Kubernetes v1.37.2 from the same pinned module as kube-apiserver. Each
# module's commands are built by one go build: it links one while it
# compiles for another, where one go build a command would leave a core
# idle during each link.
$(CLUSTER_K8S:%=$(CLUSTER_BIN)/%) &: $(STAMPS)/tools
	cd test/tools && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS) $(K8S_LDFLAGS)' -o $(CLUSTER_BIN)/ $(CLUSTER_K8S:%=k8s.io/kubernetes/cmd/%)
	touch $(CLUSTER_K8S:%=$(CLUSTER_BIN)/%)

STAMP_coredns = $(COREDNS_MOD) test/cluster/coredns/main.go $(STATIC_BUILD_MK)
$(CLUSTER_BIN)/coredns: $(STAMPS)/coredns
	cd test/cluster/coredns && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $@ .
$(CLUSTER_BIN)/coredns.version: $(STAMPS)/coredns
	@mkdir -p $(@D)
	echo $(call modversion,test/cluster/coredns,github.com/coredns/coredns) >$@

# kubectl is the tests' (make tools), beside the node's binaries.
$(CLUSTER_BIN)/kubectl: $(TOOLS_BIN)/kubectl
	@mkdir -p $(@D)
	cp $< $@

# The small static programs of test/cluster (standard library only).
$(foreach p,$(CLUSTER_SMALL),$(eval STAMP_$(p) = test/cluster/$(p)/main.go $(STATIC_BUILD_MK)))
$(CLUSTER_SMALL:%=$(CLUSTER_BIN)/%): $(CLUSTER_BIN)/%: $(STAMPS)/%
	$(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $@ ./test/cluster/$*

# Image archives: one layer with the static binary, user 65532, written
# by hack/imgtar (Makefile).
cluster-images: cluster-serving-images cluster-eventing-images cluster-monitoring-images $(CLUSTER_IMAGES)/pause.tar $(CLUSTER_IMAGES)/coredns.tar $(CLUSTER_IMAGES)/probe.tar $(CLUSTER_IMAGES)/hello.tar $(CLUSTER_IMAGES)/e2esink.tar \
	$(CLUSTER_IMAGES)/heartbeats.tar

$(CLUSTER_IMAGES)/pause.tar $(CLUSTER_IMAGES)/probe.tar $(CLUSTER_IMAGES)/hello.tar $(CLUSTER_IMAGES)/e2esink.tar: $(CLUSTER_IMAGES)/%.tar: $(CLUSTER_BIN)/% $(IMGTAR)
	@mkdir -p $(@D)
	$(IMGTAR) -o $@ -name dev.local/$*:v1 -entrypoint /$* $<=/$*

# The sample source on adapter/v2 (cmd/heartbeats), for the scenario that
# runs it in the cluster: built from this module as the release builds
# its binaries.
PROJECT_SOURCES := $(shell git ls-files -co --exclude-standard -- go.mod go.sum '*.go' | grep -v -e '_test\.go$$' -e '^test/')
STAMP_project = $(PROJECT_SOURCES) $(STATIC_BUILD_MK)
$(CLUSTER_BIN)/heartbeats: $(STAMPS)/project
	$(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $@ ./cmd/heartbeats
$(CLUSTER_IMAGES)/heartbeats.tar: $(CLUSTER_BIN)/heartbeats $(IMGTAR)
	@mkdir -p $(@D)
	$(IMGTAR) -o $@ -name dev.local/heartbeats:v1 -entrypoint /heartbeats $<=/heartbeats

$(CLUSTER_IMAGES)/coredns.tar: $(CLUSTER_BIN)/coredns $(CLUSTER_BIN)/coredns.version $(IMGTAR)
	@mkdir -p $(@D)
	$(IMGTAR) -o $@ -name dev.local/coredns:$$(cat $<.version) -entrypoint /coredns $<=/coredns

# Knative Serving's binaries, from their own module (test/cluster/serving).
SERVING_MOD := test/cluster/serving/go.mod test/cluster/serving/go.sum
SERVING_CMDS := controller webhook autoscaler autoscaler-hpa activator queue
STAMP_serving = $(SERVING_MOD) $(STATIC_BUILD_MK)
$(SERVING_CMDS:%=$(CLUSTER_BIN)/serving-%) &: $(STAMPS)/serving
	cd test/cluster/serving && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $(CLUSTER_BIN)/serving/ $(SERVING_CMDS:%=knative.dev/serving/cmd/%)
	for c in $(SERVING_CMDS); do mv $(CLUSTER_BIN)/serving/$$c $(CLUSTER_BIN)/serving-$$c; done
$(CLUSTER_BIN)/serving.version: $(STAMPS)/serving
	@mkdir -p $(@D)
	echo $(call modversion,test/cluster/serving,knative.dev/serving) >$@
$(SERVING_CMDS:%=$(CLUSTER_IMAGES)/serving-%.tar): $(CLUSTER_IMAGES)/%.tar: $(CLUSTER_BIN)/% $(CLUSTER_BIN)/serving.version $(IMGTAR)
	@mkdir -p $(@D)
	$(IMGTAR) -o $@ -name dev.local/$*:$$(cat $(CLUSTER_BIN)/serving.version) -entrypoint /$* $<=/$*

# Traefik, Serving's ingress, from its own module (test/cluster/traefik).
TRAEFIK_MOD := test/cluster/traefik/go.mod test/cluster/traefik/go.sum
STAMP_traefik = $(TRAEFIK_MOD) $(STATIC_BUILD_MK)
$(CLUSTER_BIN)/traefik.version: $(STAMPS)/traefik
	@mkdir -p $(@D)
	echo $(call modversion,test/cluster/traefik,github.com/traefik/traefik/v3) >$@
$(CLUSTER_BIN)/traefik: $(CLUSTER_BIN)/traefik.version
	cd test/cluster/traefik && $(STATIC_GO_BUILD) -ldflags "$(STATIC_LDFLAGS) -X github.com/traefik/traefik/v3/pkg/version.Version=$$(cat $<)" -o $@ github.com/traefik/traefik/v3/cmd/traefik
$(CLUSTER_IMAGES)/traefik.tar: $(CLUSTER_BIN)/traefik $(IMGTAR)
	@mkdir -p $(@D)
	$(IMGTAR) -o $@ -name dev.local/traefik:$$(cat $<.version) -entrypoint /traefik $<=/traefik

cluster-serving-bins: $(SERVING_CMDS:%=$(CLUSTER_BIN)/serving-%) $(CLUSTER_BIN)/serving.version $(CLUSTER_BIN)/traefik
cluster-serving-images: $(SERVING_CMDS:%=$(CLUSTER_IMAGES)/serving-%.tar) $(CLUSTER_IMAGES)/traefik.tar

# Knative Eventing's binaries, from their own module (test/cluster/eventing).
# It resolves every package it shares with Serving's module and with the
# project to the same version (the cluster modules' raised to match), so
# a cold build, static and -trimpath for all three, compiles client-go and
# knative.dev/pkg once.
EVENTING_MOD := test/cluster/eventing/go.mod test/cluster/eventing/go.sum
EVENTING_CMDS := controller webhook mtping
STAMP_eventing = $(EVENTING_MOD) $(STATIC_BUILD_MK)
$(EVENTING_CMDS:%=$(CLUSTER_BIN)/eventing-%) &: $(STAMPS)/eventing
	cd test/cluster/eventing && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $(CLUSTER_BIN)/eventing/ $(EVENTING_CMDS:%=knative.dev/eventing/cmd/%)
	for c in $(EVENTING_CMDS); do mv $(CLUSTER_BIN)/eventing/$$c $(CLUSTER_BIN)/eventing-$$c; done
$(CLUSTER_BIN)/eventing.version: $(STAMPS)/eventing
	@mkdir -p $(@D)
	echo $(call modversion,test/cluster/eventing,knative.dev/eventing) >$@
$(EVENTING_CMDS:%=$(CLUSTER_IMAGES)/eventing-%.tar): $(CLUSTER_IMAGES)/%.tar: $(CLUSTER_BIN)/% $(CLUSTER_BIN)/eventing.version $(IMGTAR)
	@mkdir -p $(@D)
	$(IMGTAR) -o $@ -name dev.local/$*:$$(cat $(CLUSTER_BIN)/eventing.version) -entrypoint /$* $<=/$*

# The Knative Operator, from its own module (test/cluster/operator), for
# the Operator flavour (operator.sh): its binary and, where ko would put
# them (KO_DATA_PATH), the Eventing release manifests of the eventing
# module the cluster runs (v0.X.Y is Knative 1.(X-27).Y).
OPERATOR_MOD := test/cluster/operator/go.mod test/cluster/operator/go.sum
STAMP_operator = $(OPERATOR_MOD) $(STATIC_BUILD_MK)
$(CLUSTER_BIN)/operator: $(STAMPS)/operator
	cd test/cluster/operator && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $@ knative.dev/operator/cmd/operator
$(CLUSTER_BIN)/operator.version: $(STAMPS)/operator
	@mkdir -p $(@D)
	echo $(call modversion,test/cluster/operator,knative.dev/operator) >$@
$(CLUSTER_IMAGES)/operator.tar: $(CLUSTER_BIN)/operator $(CLUSTER_BIN)/operator.version $(CLUSTER_BIN)/eventing.version $(CLUSTER_BIN)/eventing-prev.version $(IMGTAR)
	@mkdir -p $(@D)
	set -eu; kodata=$$(cd test/cluster/operator && $(GO) list -m -f '{{.Dir}}' knative.dev/operator)/cmd/operator/kodata/knative-eventing; \
	files=; for v in $$(cat $(CLUSTER_BIN)/eventing.version $(CLUSTER_BIN)/eventing-prev.version); do \
	  minor=$${v#v0.}; minor=$${minor%%.*}; release=1.$$((minor - 27)).$${v##*.}; \
	  for f in $$kodata/$$release/*.yaml; do files="$$files $$f=/var/run/ko/knative-eventing/$$release/$$(basename $$f)"; done; \
	done; \
	$(IMGTAR) -o $@ -name dev.local/operator:$$(cat $<.version) -entrypoint /operator -env KO_DATA_PATH=/var/run/ko $<=/operator $$files

# The previous Eventing release's controller and webhook, from their own
# module (test/cluster/eventing-prev), for the Operator-driven Eventing
# upgrade `make bench-cluster` measures (BenchmarkOperatorUpgrade). Not
# part of make test or cluster-up: cluster-eventing-prev builds them and
# imports them into the running node. The Operator's image carries the
# release's manifests in any case: its version is a line of go.mod.
EVENTING_PREV_MOD := test/cluster/eventing-prev/go.mod test/cluster/eventing-prev/go.sum
EVENTING_PREV_CMDS := controller webhook
EVENTING_PREV_IMAGES := $(CURDIR)/.cache/cluster/images-prev
STAMP_eventing-prev = $(EVENTING_PREV_MOD) $(STATIC_BUILD_MK)
$(EVENTING_PREV_CMDS:%=$(CLUSTER_BIN)/eventing-prev-%) &: $(STAMPS)/eventing-prev
	cd test/cluster/eventing-prev && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $(CLUSTER_BIN)/eventing-prev/ $(EVENTING_PREV_CMDS:%=knative.dev/eventing/cmd/%)
	for c in $(EVENTING_PREV_CMDS); do mv $(CLUSTER_BIN)/eventing-prev/$$c $(CLUSTER_BIN)/eventing-prev-$$c; done
$(CLUSTER_BIN)/eventing-prev.version: $(STAMPS)/eventing-prev
	@mkdir -p $(@D)
	echo $(call modversion,test/cluster/eventing-prev,knative.dev/eventing) >$@
$(EVENTING_PREV_CMDS:%=$(EVENTING_PREV_IMAGES)/eventing-%.tar): $(EVENTING_PREV_IMAGES)/eventing-%.tar: $(CLUSTER_BIN)/eventing-prev-% $(CLUSTER_BIN)/eventing-prev.version $(IMGTAR)
	@mkdir -p $(@D)
	$(IMGTAR) -o $@ -name dev.local/eventing-$*:$$(cat $(CLUSTER_BIN)/eventing-prev.version) -entrypoint /eventing-$* $<=/eventing-$*

.PHONY: cluster-eventing-prev
cluster-eventing-prev: $(EVENTING_PREV_CMDS:%=$(EVENTING_PREV_IMAGES)/eventing-%.tar)
	$(CLUSTER_DIR)/import.sh $^

cluster-eventing-bins: $(EVENTING_CMDS:%=$(CLUSTER_BIN)/eventing-%) $(CLUSTER_BIN)/eventing.version $(CLUSTER_BIN)/operator $(CLUSTER_BIN)/operator.version
cluster-eventing-images: $(EVENTING_CMDS:%=$(CLUSTER_IMAGES)/eventing-%.tar) $(CLUSTER_IMAGES)/operator.tar

# Prometheus: Debian's binary (package prometheus) with the libc it links
# beside it, and podsd (its pod discovery: Debian's build has no
# kubernetes_sd_configs). Prometheus Adapter from its own module.
$(CLUSTER_BIN)/prometheus.version: /usr/bin/prometheus
	@mkdir -p $(@D)
	echo v$$(dpkg-query -W -f '$${Version}' prometheus | sed 's/[+~-].*//') >$@
$(CLUSTER_IMAGES)/prometheus.tar: /usr/bin/prometheus $(CLUSTER_BIN)/prometheus.version $(CLUSTER_BIN)/podsd $(IMGTAR)
	@mkdir -p $(@D)
	$(IMGTAR) -o $@ -name dev.local/prometheus:$$(cat $(CLUSTER_BIN)/prometheus.version) -entrypoint /prometheus \
	  /usr/bin/prometheus=/prometheus $(CLUSTER_BIN)/podsd=/podsd /lib/x86_64-linux-gnu/libc.so.6=/lib/x86_64-linux-gnu/libc.so.6 \
	  /lib64/ld-linux-x86-64.so.2=/lib64/ld-linux-x86-64.so.2
ADAPTER_MOD := test/cluster/prometheus-adapter/go.mod test/cluster/prometheus-adapter/go.sum
STAMP_prometheus-adapter = $(ADAPTER_MOD) $(STATIC_BUILD_MK)
$(CLUSTER_BIN)/prometheus-adapter: $(STAMPS)/prometheus-adapter
	cd test/cluster/prometheus-adapter && $(STATIC_GO_BUILD) -ldflags '$(STATIC_LDFLAGS)' -o $@ sigs.k8s.io/prometheus-adapter/cmd/adapter
$(CLUSTER_BIN)/prometheus-adapter.version: $(STAMPS)/prometheus-adapter
	@mkdir -p $(@D)
	echo $(call modversion,test/cluster/prometheus-adapter,sigs.k8s.io/prometheus-adapter) >$@
$(CLUSTER_IMAGES)/prometheus-adapter.tar: $(CLUSTER_BIN)/prometheus-adapter $(CLUSTER_BIN)/prometheus-adapter.version $(IMGTAR)
	@mkdir -p $(@D)
	$(IMGTAR) -o $@ -name dev.local/prometheus-adapter:$$(cat $<.version) -entrypoint /prometheus-adapter $<=/prometheus-adapter

cluster-monitoring-bins: $(CLUSTER_BIN)/prometheus.version $(CLUSTER_BIN)/prometheus-adapter $(CLUSTER_BIN)/prometheus-adapter.version
cluster-monitoring-images: $(CLUSTER_IMAGES)/prometheus.tar $(CLUSTER_IMAGES)/prometheus-adapter.tar

# The end-to-end scenarios (test/cluster/e2e) on the cluster cluster-up
# makes (or finds running); -v so a failing run's log tells why.
.PHONY: e2e-cluster e2e-scenarios cluster-test
e2e-cluster: cluster-up ## end-to-end scenarios on the one-node cluster
	@$(MAKE) --no-print-directory e2e-scenarios

# The scenarios' test binary is compiled as vet and the release compile
# the module (static, -trimpath: hack/static-build.mk), so that a cold
# make test compiles client-go, Knative's APIs and the rest once.
E2E_GO_TEST = CGO_ENABLED=0 $(GO) test -trimpath -tags cluster -count=1

# e2e-cluster without cluster-up, for make test's phases.
e2e-scenarios:
	$(E2E_GO_TEST) -timeout 60m -v ./test/cluster/e2e/ 2>&1 | tee $(CURDIR)/.cache/cluster/e2e.log; exit $${PIPESTATUS[0]}

# The cluster's benchmarks (test/cluster/e2e, Benchmark*): an async
# hand-off through Traefik and queue-proxy, one caller and 32.
.PHONY: bench-cluster
bench-cluster: cluster-up ## benchmarks on the one-node cluster (about 50 minutes)
	@$(MAKE) --no-print-directory cluster-eventing-prev
	$(E2E_GO_TEST) -run '^$$' -bench '^BenchmarkHandOff$$' -benchtime 2000x -timeout 20m ./test/cluster/e2e/
	$(E2E_GO_TEST) -run '^$$' -bench '^Benchmark(BurstToPods|SeedAdapters|OperatorUpgrade)$$' -benchtime 1x -timeout 80m -v ./test/cluster/e2e/

# What `make test` runs, in phases (hack/phase.sh): the build, the
# start, the scenarios, then cluster-down, unless a cluster was already
# running (it is left as it was found). The scenarios' log (with the
# pods' logs of a failing one) stays in .cache/cluster/e2e.log.
cluster-test:
	@set -uo pipefail; running=; [ -d $(CURDIR)/.cache/cluster/run ] && running=1; \
	$(PHASE) cluster-build $(MAKE) --no-print-directory cluster-build && \
	$(PHASE) cluster-up $(MAKE) --no-print-directory cluster-start && \
	$(PHASE) scenarios $(MAKE) --no-print-directory e2e-scenarios; rc=$$?; \
	if [ -z "$$running" ]; then $(PHASE) cluster-down $(MAKE) --no-print-directory cluster-down || rc=1; fi; \
	exit $$rc
