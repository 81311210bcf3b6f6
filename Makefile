# pkgsync — every routine task. `make help` lists them.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

export GOTOOLCHAIN := local
export GOFLAGS := -mod=mod

BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
# Where the controller image is published; `pkgsync install` defaults to $(IMAGE_REPO):$(VERSION).
IMAGE_REPO ?= ghcr.io/pkgsync/pkgsync
LDFLAGS := $(foreach v,Version=$(VERSION) Commit=$(COMMIT) Repository=$(IMAGE_REPO),-X pkgsync.dev/pkgsync/internal/version.$(v))

KUBE_VERSION := v1.36.3
KUBE_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=36)

# envtest and the test environment find kube-apiserver, etcd and registry here.
export KUBEBUILDER_ASSETS := $(BIN)

TEST_TIMEOUT ?= 30m
GO_TEST_FLAGS ?=

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: build
build: ## Build bin/pkgsync.
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/pkgsync ./cmd/pkgsync

.PHONY: demo
demo: tools build ## Run the demo: registry, management + hosted control planes, a package rolled out and updated (KEEP=1 leaves it running).
	go build -o $(BIN)/pkgsync-demo ./test/demo
	KEEP='$(KEEP)' $(BIN)/pkgsync-demo --pkgsync $(BIN)/pkgsync

.PHONY: test
test: tools ## Run unit and e2e tests with the race detector against real control planes and a registry.
	go test -race -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) ./...

# zot, the registry the project's users run, is built from the source kept beside the repository
# (its module is not on the module proxy); `make test` does not need it.
ZOT_SRC ?= $(abspath $(CURDIR)/../shared/zot)
# The tests that reach a registry through $$PKGSYNC_TEST_REGISTRY: every plain-registry test of
# source and cmd/pkgsync, and the e2e suite's TestUserRegistry.
ZOT_TEST_PACKAGES ?= ./source/ ./cmd/pkgsync/

.PHONY: test-zot
test-zot: tools $(BIN)/zot ## Run the tests that use a registry against zot as well (built from ZOT_SRC, ../shared/zot by default): PKGSYNC_TEST_REGISTRY=zot.
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	TMPDIR="$$tmp" PKGSYNC_TEST_REGISTRY=zot go test -race -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) $(ZOT_TEST_PACKAGES) && \
	TMPDIR="$$tmp" PKGSYNC_TEST_REGISTRY=zot go test -race -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) -run '^TestUserRegistry$$' ./test/e2e/

.PHONY: lint
lint: $(BIN)/golangci-lint ## Check gofmt, go vet and golangci-lint.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	$(BIN)/golangci-lint run ./...

.PHONY: generate
generate: $(BIN)/controller-gen ## Generate deep-copy functions, CRDs and RBAC from the API types and markers.
	$(BIN)/controller-gen object paths=./api/...
	$(BIN)/controller-gen crd:crdVersions=v1 rbac:roleName=pkgsync-manager paths=./api/... paths=./internal/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@# controller-gen emits an empty CRD for PackageManifest, a file format rather than a resource.
	rm -f config/crd/bases/_.yaml

##@ Release

# The commit time: the image records it instead of the build time, so the same commit gives the
# same image digest (https://reproducible-builds.org/specs/source-date-epoch/).
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
PLATFORMS ?= linux/amd64,linux/arm64
DIST := $(CURDIR)/dist
# IMAGE=REGISTRY/REPOSITORY:TAG pushes the image there; without it the image is only written to
# dist/pkgsync-image.tar, under the name it is published as.
IMAGE ?=
RELEASE_IMAGE = $(or $(IMAGE),$(IMAGE_REPO):$(VERSION))
# The provenance's builder: a CI system passes its own URI (BUILDER_ID=...).
BUILDER_ID ?=
# The cosign private key `make sign` signs the release with (its password in $$COSIGN_PASSWORD).
KEY ?=
# KEYLESS=1: `make sign` signs keylessly instead, with a Fulcio certificate for the OIDC identity
# of the token in ID_TOKEN_FILE (else $$SIGSTORE_ID_TOKEN); FULCIO_URL, REKOR_URL and
# TRUSTED_ROOT (a trusted_root.json to check the bundles against) default to the public instance.
KEYLESS ?=
ID_TOKEN_FILE ?=
FULCIO_URL ?=
REKOR_URL ?=
TRUSTED_ROOT ?=

.PHONY: image
image: build ## Build the controller image (linux/amd64, linux/arm64) into dist/pkgsync-image.tar, an OCI layout, with its SBOM (dist/pkgsync.spdx.json) and provenance (dist/provenance.intoto.json) attached; IMAGE=REGISTRY/REPO:TAG also pushes them.
	@mkdir -p $(DIST)
	go build -o $(BIN)/release-image ./hack/release-image
	$(BIN)/release-image --platform=$(PLATFORMS) --version=$(VERSION) --revision=$(COMMIT) --created=$(SOURCE_DATE_EPOCH) \
		--sbom=$(DIST)/pkgsync.spdx.json --provenance=$(DIST)/provenance.intoto.json $(if $(BUILDER_ID),--builder-id=$(BUILDER_ID)) \
		--archive=$(DIST)/pkgsync-image.tar --tag=$(RELEASE_IMAGE) --output-format=digest > $(DIST)/pkgsync-image.digest
	$(if $(IMAGE),$(BIN)/pkgsync push $(DIST)/pkgsync-image.tar $(RELEASE_IMAGE))
	@echo "$(RELEASE_IMAGE)@$$(cat $(DIST)/pkgsync-image.digest)"

.PHONY: release
release: image ## Write dist/install.yaml: CRDs, RBAC and the controller, its image pinned by digest (IMAGE=... to push the image too).
	$(BIN)/pkgsync install --export --image=$(RELEASE_IMAGE)@$$(cat $(DIST)/pkgsync-image.digest) > $(DIST)/install.yaml
	@echo "Wrote $(DIST)/install.yaml"

.PHONY: sign
sign: ## Sign the pushed release image (IMAGE=...) with KEY=cosign.key, or KEYLESS=1 [ID_TOKEN_FILE=...] with a Fulcio certificate logged in Rekor, and its provenance and SBOM as attestations (after make release IMAGE=...).
	@test -n "$(IMAGE)" || { echo "make sign: IMAGE=REGISTRY/REPO:TAG names the pushed image" >&2; exit 2; }
	@test -n "$(KEY)$(KEYLESS)" || { echo "make sign: KEY=cosign.key names the private key (or KEYLESS=1 signs keylessly)" >&2; exit 2; }
	$(BIN)/pkgsync sign $(RELEASE_IMAGE)@$$(cat $(DIST)/pkgsync-image.digest) \
		$(if $(KEYLESS),--keyless $(if $(ID_TOKEN_FILE),--identity-token-file=$(ID_TOKEN_FILE)) $(if $(FULCIO_URL),--fulcio-url=$(FULCIO_URL)) \
			$(if $(REKOR_URL),--rekor-url=$(REKOR_URL)) $(if $(TRUSTED_ROOT),--trusted-root=$(TRUSTED_ROOT)),--key=$(KEY)) \
		--provenance=$(DIST)/provenance.intoto.json --sbom=$(DIST)/pkgsync.spdx.json

##@ Benchmarks

BENCH_FLAGS ?=

.PHONY: bench
bench: tools ## Run the microbenchmarks, the fleet benchmark on real control planes (Packages created gradually, then all before the controller starts), then pkgsync against a raw server-side apply of the same objects: 300 Packages of 10 objects, one of 8000 (BENCH_FLAGS="-packages 1000" sizes the fleet and skips the raw comparison, "-compare-dead 1,5" adds dead hosted clusters, "-hcpkg" measures one HostedClusterPackage instead, "-shards 2" spreads the fleet over two controller processes, "-compare-limit" runs each arrival with the controller's memory limit and without and prints the ratios; docs/benchmarks.md).
	go test -run '^$$' -bench . -benchmem ./source/ ./render/ ./apply/
	go run ./test/bench $(BENCH_FLAGS)
	$(if $(filter -hcpkg -notify -compare-dead inline -controller=inline,$(BENCH_FLAGS)),,go run ./test/bench -arrival restart $(BENCH_FLAGS))
ifeq ($(BENCH_FLAGS),)
	go run ./test/bench -shape management -packages 300 -objects 10 -hosted-planes 1 -hostedclusters=false -interval 20s -intervals 1
	go run ./test/bench -shape big -packages 1 -objects 8000 -hosted-planes 1 -hostedclusters=false -interval 20s -intervals 1 -timeout 4m
endif

##@ Tools (built from the Go module proxy into bin/; a no-op when current)

.PHONY: tools
tools: $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kwok $(BIN)/etcd $(BIN)/registry $(BIN)/cosign ## Build kube-apiserver, kube-controller-manager, kube-scheduler, KWOK, etcd, the registry and the cosign CLI for tests.

# kube-apiserver, kube-controller-manager and kube-scheduler: one Kubernetes module, one version.
$(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler: $(BIN)/%: tools/kubernetes/go.mod tools/kubernetes/go.sum
	@echo "Building $* $(KUBE_VERSION) from the module proxy (a few minutes on the first run)..."
	cd tools/kubernetes && go build -ldflags "$(KUBE_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/$*

# KWOK simulates the test clusters' nodes and their pods (test/testenv.StartCluster) with its own
# stages, read from its module as it ships them (kustomize/stage: fast node start, heartbeat
# with a lease, pods ready once scheduled, completed, and gone once deleted).
KWOK_STAGES := node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
	pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml
$(BIN)/kwok: tools/kwok/go.mod tools/kwok/go.sum
	@echo "Building KWOK from the module proxy..."
	cd tools/kwok && go build -o $@ sigs.k8s.io/kwok/cmd/kwok
	cd tools/kwok && dir=$$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) && \
		for f in $(KWOK_STAGES); do echo "---"; cat "$$dir/kustomize/stage/$$f"; done > $(BIN)/kwok-stages.yaml

$(BIN)/etcd: tools/etcd/go.mod tools/etcd/go.sum
	@echo "Building etcd from the module proxy..."
	cd tools/etcd && go build -o $@ go.etcd.io/etcd/server/v3

$(BIN)/registry: tools/registry/go.mod tools/registry/go.sum
	@echo "Building the CNCF Distribution registry from the module proxy..."
	cd tools/registry && go build -o $@ github.com/distribution/distribution/v3/cmd/registry

# Part of tools, so that the tests of what cosign reads and writes (source/verify_cosign_test.go,
# the release attestations, pkgsync key generate) run in CI against the cosign CLI itself; without
# it they are skipped. It takes about 4 minutes to build on a 2-core machine, once.
.PHONY: cosign
cosign: $(BIN)/cosign ## Build the cosign CLI for the signature interoperability test.

$(BIN)/cosign: tools/cosign/go.mod tools/cosign/go.sum
	@echo "Building the cosign CLI from the module proxy (a few minutes)..."
	cd tools/cosign && go build -o $@ github.com/sigstore/cosign/v2/cmd/cosign

.PHONY: zot
zot: $(BIN)/zot ## Build zot from ZOT_SRC (../shared/zot by default) for make test-zot.

$(BIN)/zot: $(wildcard $(ZOT_SRC)/go.mod $(ZOT_SRC)/go.sum)
	@test -f "$(ZOT_SRC)/go.mod" || { echo "make zot: no zot source in $(ZOT_SRC) (set ZOT_SRC)" >&2; exit 2; }
	@echo "Building zot from $(ZOT_SRC) (a few minutes on the first run)..."
	cd "$(ZOT_SRC)" && CGO_ENABLED=0 GOEXPERIMENT=jsonv2 GOFLAGS= go build -trimpath -o $@ ./cmd/zot

$(BIN)/controller-gen: tools/controller-gen/go.mod tools/controller-gen/go.sum
	cd tools/controller-gen && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(BIN)/golangci-lint: tools/golangci-lint/go.mod tools/golangci-lint/go.sum
	@echo "Building golangci-lint from the module proxy..."
	cd tools/golangci-lint && go build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: clean
clean: ## Remove bin/ (tools are rebuilt on the next run).
	rm -rf $(BIN)
