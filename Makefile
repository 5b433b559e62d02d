# The everyday commands. `make run` and `make test` bring up Redis and Postgres
# first (scripts/services.sh reuses running ones or starts local ones under .data/).

GO ?= go
# Benchmarks to run and where: make bench BENCH=Limiter PKG=./ratelimit/...
BENCH ?= .
PKG ?= ./...

.PHONY: run test lint e2e e2e-setup proxies promtool bench build generate fmt vet services services-stop

run: services
	$(GO) run ./cmd/xcloak serve --dev

# Every Go test, the browser tests in e2e/, the tests behind real nginx
# and Caddy and the check of the alert rules included; their setup runs
# first, and lint before them. The allocation counts run again without
# -race, which skips them: its instrumentation allocates. So does the
# two-replica cluster test, whose burst of argon2id hashes outlasts a
# request's write timeout under -race. A package may take longer than go
# test's default 10 minutes on a loaded two-core machine (cmd/xcloak's
# replicas and outages under -race): 20, before a hang is called one.
test: lint services e2e-setup proxies promtool
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run 'Allocat' ./attack/ ./auth/ ./ratelimit/ ./web/
	$(GO) test -count=1 -run '^TestTwoReplicasOnRedisCluster$$' ./cmd/xcloak/

# Only the browser tests: installs Chromium and the Playwright driver
# (e2e/setup.sh), and nginx and Caddy for the forward-auth journeys, when
# missing, then runs the journeys in e2e/.
e2e: services e2e-setup proxies
	$(GO) test -count=1 ./e2e/

e2e-setup:
	e2e/setup.sh

# nginx and Caddy, which tests run in front of XCloak, and HAProxy, which
# checks its documented configuration (installed when missing, as root).
proxies:
	scripts/proxies.sh

# promtool, which checks deploy/prometheus/alerts.yml and runs its unit
# tests (installed when missing, as root).
promtool:
	scripts/promtool.sh

bench: services
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem $(PKG)

# VERSION names the release xcloak version prints; empty, it says the
# module's version or devel.
VERSION ?=

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/xcloak ./cmd/xcloak

generate:
	$(GO) tool templ generate

fmt:
	$(GO) fmt ./...
	$(GO) tool templ fmt .

vet:
	$(GO) vet ./...

# go vet, staticcheck (whose version go.mod pins) and gofmt; any finding fails the
# target, and so make test and CI.
lint: vet
	$(GO) tool staticcheck ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); \
	if [ -n "$$unformatted" ]; then echo "gofmt -w these files:"; echo "$$unformatted"; exit 1; fi

services:
	scripts/services.sh

services-stop:
	scripts/services.sh stop
