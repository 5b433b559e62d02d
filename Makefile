# The everyday commands. `make run` and `make test` bring up Redis and Postgres
# first (scripts/services.sh reuses running ones or starts local ones under .data/).

GO ?= go
# Benchmarks to run and where: make bench BENCH=Limiter PKG=./ratelimit/...
BENCH ?= .
PKG ?= ./...

.PHONY: run test bench build generate fmt vet services services-stop

run: services
	$(GO) run ./cmd/xcloak serve --dev

test: services
	$(GO) test -race -count=1 ./...

bench: services
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem $(PKG)

build:
	$(GO) build -o bin/xcloak ./cmd/xcloak

generate:
	$(GO) tool templ generate

fmt:
	$(GO) fmt ./...
	$(GO) tool templ fmt .

vet:
	$(GO) vet ./...

services:
	scripts/services.sh

services-stop:
	scripts/services.sh stop
