# pkgsync — every routine task. `make help` lists them.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

export GOTOOLCHAIN := local
export GOFLAGS := -mod=mod

BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
LDFLAGS := -X pkgsync.dev/pkgsync/internal/version.Version=$(VERSION)

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

##@ Benchmarks

BENCH_FLAGS ?=

.PHONY: bench
bench: tools ## Run the microbenchmarks, then the fleet benchmark on real control planes (BENCH_FLAGS="-packages 1000" sizes it; docs/benchmarks.md).
	go test -run '^$$' -bench . -benchmem ./source/ ./render/ ./apply/
	go run ./test/bench $(BENCH_FLAGS)

##@ Tools (built from the Go module proxy into bin/; a no-op when current)

.PHONY: tools
tools: $(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/registry ## Build kube-apiserver, etcd and the registry for tests.

$(BIN)/kube-apiserver: tools/kube-apiserver/go.mod tools/kube-apiserver/go.sum
	@echo "Building kube-apiserver $(KUBE_VERSION) from the module proxy (a few minutes on the first run)..."
	cd tools/kube-apiserver && go build -ldflags "$(KUBE_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(BIN)/etcd: tools/etcd/go.mod tools/etcd/go.sum
	@echo "Building etcd from the module proxy..."
	cd tools/etcd && go build -o $@ go.etcd.io/etcd/server/v3

$(BIN)/registry: tools/registry/go.mod tools/registry/go.sum
	@echo "Building the CNCF Distribution registry from the module proxy..."
	cd tools/registry && go build -o $@ github.com/distribution/distribution/v3/cmd/registry

$(BIN)/controller-gen: tools/controller-gen/go.mod tools/controller-gen/go.sum
	cd tools/controller-gen && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(BIN)/golangci-lint: tools/golangci-lint/go.mod tools/golangci-lint/go.sum
	@echo "Building golangci-lint from the module proxy..."
	cd tools/golangci-lint && go build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: clean
clean: ## Remove bin/ (tools are rebuilt on the next run).
	rm -rf $(BIN)
