# kubectl-mesh. `make demo` and `make test` are the two commands a newcomer runs.
SHELL := /usr/bin/env bash
GO ?= go
# krew wants semver with a leading v: a tag, else v0.0.0-g<commit>.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' 2>/dev/null || echo v0.0.0-g$$(git rev-parse --short HEAD 2>/dev/null || echo dev))
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
PKG := github.com/kubectl-mesh/kubectl-mesh
LDFLAGS := -s -w -X $(PKG)/internal/buildinfo.Version=$(VERSION) -X $(PKG)/internal/buildinfo.Commit=$(COMMIT) -X $(PKG)/internal/buildinfo.Date=$(DATE)
BIN := _output/bin

PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
RELEASE_URL ?= https://github.com/kubectl-mesh/kubectl-mesh/releases/download/$(VERSION)
KREW_BIN := $(or $(KMESH_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kubectl-mesh)/krew

.PHONY: all build test e2e unit fuzz bench demo cluster-up cluster-down cluster-status fmt vet clean dist krew-manifest krew-validate krew-install-test

all: build

## build: the kubectl-mesh binary in _output/bin
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kubectl-mesh ./cmd/kubectl-mesh

## test: everything, on a local cluster it starts and stops (what CI runs)
test:
	hack/test.sh

## e2e: end-to-end tests on the cluster that is up (make demo or make cluster-up first); RUN=TestCheckCatalogue/KM-CONN-006 runs one, planting only what it needs
e2e:
	RUN='$(RUN)' hack/e2e.sh

## lint: golangci-lint with .golangci.yml's linters (built once from hack/tools/lint)
lint:
	hack/lint.sh

## unit: the tests that need no cluster (cluster tests skip without one)
unit:
	$(GO) test ./...

## fuzz: every parser and renderer fuzzed for $(FUZZTIME) each (no panic, no raw control character in any output)
FUZZTIME ?= 60s
FUZZ_TARGETS := ./explain/capture:FuzzParseSave ./explain/capture:FuzzParseDump ./cmd:FuzzIptablesDump ./cmd:FuzzExpectArgs ./cmd:FuzzManifest ./cmd:FuzzPod
fuzz:
	set -e; for t in $(FUZZ_TARGETS); do \
	  echo "== $${t#*:} ($${t%%:*}, $(FUZZTIME))"; \
	  $(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) 2>&1 | tail -n 3; \
	  test $${PIPESTATUS[0]} -eq 0; \
	done

## bench: the regression benchmark of the cluster sweeps (10,000 pods; SCALE=100k adds 90,000): fails when a goal is missed
bench: build
	CHECK=1 hack/bench/sweep.sh

## demo: the local cluster with a demo mesh, and kubectl mesh run against it
demo: build
	hack/demo/demo.sh

## dist: release archives for every platform, with LICENSE, README and the completion shim, and their sha256
dist:
	rm -rf dist && mkdir -p dist/bin
	$(GO) run ./cmd/kubectl-mesh completion shim > dist/bin/kubectl_complete-mesh && chmod +x dist/bin/kubectl_complete-mesh
	set -e; for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/bin/$$os-$$arch/kubectl-mesh$$ext ./cmd/kubectl-mesh; \
	  $(GO) run ./hack/dist archive -version $(VERSION) -bin dist/bin/$$os-$$arch/kubectl-mesh$$ext -os $$os -arch $$arch -out dist \
	    LICENSE README.md dist/bin/kubectl_complete-mesh; \
	done
	rm -rf dist/bin

## krew-manifest: dist/krew/mesh.yaml and plugins/mesh.yaml (the custom index layout) for this version
krew-manifest: dist
	$(GO) run ./hack/dist manifest -version $(VERSION) -template .krew.yaml -dist dist dist/krew/mesh.yaml dist/index/plugins/mesh.yaml

## krew-validate: krew's own validator on the rendered manifest
krew-validate: krew-manifest
	hack/tools/build-krew.sh
	$(KREW_BIN)/validate-krew-manifest -manifest dist/krew/mesh.yaml -skip-install

## krew-install-test: install the fresh archive with krew into a temporary KREW_ROOT, offline, and run it through kubectl
krew-install-test: krew-manifest
	hack/tools/krew-install-test.sh $(VERSION)

## cluster-up / cluster-down: the local test cluster
cluster-up:
	hack/cluster/up.sh

cluster-down:
	hack/cluster/down.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf _output dist
