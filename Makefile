# The repository's one entry point for tests and checks. Every target walks
# every Go module of the repository (the root one and any nested module).

GO          ?= go
MODULES     := $(shell find . -name go.mod -not -path './.git/*' -printf '%h\n' | sort)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 30s
SOAKTIME    ?= 2m
TEST_JOBS   ?= 4
# the modules whose tests take longest start first
SLOW_MODULES := ./faults . ./redis ./examples ./internal/release ./bench
# the modules whose tests hold bounds in real time; the others' run niced
REALTIME_MODULES := ./faults ./redis ./examples
BENCHTIME   ?= 1s

.PHONY: test soak lint deps api tidy fuzz bench bench-fast redis-server nginx

## test: go test -race over every module, TEST_JOBS at a time (fuzz
## targets run on their seed corpora, soaks briefly), then the root
## package's tests that hold figures in fake time without -race (see
## figuref); the redis module's tests run a real redis-server, and the
## bench module's nginx, both installed here when missing
test: redis-server nginx
	@GO=$(GO) JOBS=$(TEST_JOBS) REALTIME="$(REALTIME_MODULES)" .ci/test-modules $(SLOW_MODULES) $(filter-out $(SLOW_MODULES),$(MODULES))

## soak: the soaks for SOAKTIME each (default 2m): the root package's
## TestSoak, then the faults module's TestSoakUnderToxics
soak: redis-server
	$(GO) test -race -count=1 -run '^TestSoak$$' . -soak=$(SOAKTIME)
	cd faults && $(GO) test -race -count=1 -run '^TestSoakUnderToxics$$' . -soak=$(SOAKTIME)

## redis-server: install Debian's redis-server when it is not on PATH
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "== installing redis-server"; \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends redis-server; \
	}

## nginx: install Debian's nginx-light when nginx is not on PATH nor in /usr/sbin
## (the bench runs it on loopback from a configuration of its own)
nginx:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { \
		echo "== installing nginx-light"; \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends nginx-light; \
	}

## lint: gofmt, go vet and staticcheck over every module, then deps, then api
lint: lint-code deps api

## api: each published module's API against its last release (apidiff); an
## incompatible change fails unless CHANGELOG.md's next version allows it
api:
	$(GO) run ./internal/release/cmd/apicheck

## tidy: go mod tidy in every module, the repository's own served from the
## working tree (go mod tidy reads no go.work)
tidy:
	$(GO) run ./internal/release/cmd/tidy

.PHONY: lint-code
lint-code:
	@set -e; unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@set -e; for m in $(MODULES); do \
		echo "== vet + staticcheck $$m"; \
		(cd $$m && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...); \
	done

## deps: every requirement written in a go.mod here is at its latest release
## (go list -m -u), but those .ci/deps-held lists with the reason
deps:
	@set -e; behind=$$($(GO) list -m -u -f '{{if .Update}}{{.Path}} {{.Version}} {{.Update.Version}}{{end}}' all | \
		while read -r path version update; do \
			[ -n "$$path" ] || continue; \
			grep -qsE "(^|[[:space:]])$$path v" $(addsuffix /go.mod,$(MODULES)) || continue; \
			grep -qs "^$$path " .ci/deps-held && continue; \
			echo "  $$path $$version, latest $$update"; \
		done); \
	if [ -n "$$behind" ]; then echo "requirements behind their latest release:"; echo "$$behind"; exit 1; fi; \
	echo "== deps: every requirement at its latest release (held back: $$(grep -cv '^#' .ci/deps-held))"

## fuzz: run each fuzz target for FUZZTIME (default 30s)
fuzz:
	@set -e; for m in $(MODULES); do \
		(cd $$m && for pkg in $$($(GO) list ./...); do \
			for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
				echo "== fuzz $$pkg $$target"; \
				$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
			done; \
		done); \
	done

## bench: benchmarks of every module, with allocations, then the goodput
## tables on loopback (GOODPUT='-scenario bucket' picks scenarios, '-server
## throttled' servers, '-contender ratewise' clients; cmd/goodput -list lists them)
bench: nginx
	@set -e; for m in $(MODULES); do \
		(cd $$m && $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...); \
	done
	cd bench && $(GO) run ./cmd/goodput $(GOODPUT)

## bench-fast: the goodput tables in fake time, in-process (seconds;
## GOODPUT='-server httprate' picks servers, as for bench)
bench-fast:
	cd bench && $(GO) test -count=1 -run TestGoodputInProcess -fast $(GOODPUT) .
