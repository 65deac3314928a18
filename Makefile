# kubectl-mesh. `make demo` and `make test` are the two commands a newcomer runs.
SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
PKG := github.com/kubectl-mesh/kubectl-mesh
LDFLAGS := -s -w -X $(PKG)/internal/buildinfo.Version=$(VERSION) -X $(PKG)/internal/buildinfo.Commit=$(COMMIT) -X $(PKG)/internal/buildinfo.Date=$(DATE)
BIN := _output/bin

.PHONY: all build test unit demo cluster-up cluster-down cluster-status fmt vet clean

all: build

## build: the kubectl-mesh binary in _output/bin
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kubectl-mesh ./cmd/kubectl-mesh

## test: everything, on a local cluster it starts and stops (what CI runs)
test:
	hack/test.sh

## unit: the tests that need no cluster (cluster tests skip without one)
unit:
	$(GO) test ./...

## demo: the local cluster with a demo mesh, and kubectl mesh run against it
demo: build
	hack/demo/demo.sh

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
