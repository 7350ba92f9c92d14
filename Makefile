# deadletter — run `make help` for the list of targets.
SHELL := bash
.DEFAULT_GOAL := help
GO ?= go

CACHE  := $(CURDIR)/.cache
BIN    := $(CACHE)/bin
NATS_CLI := $(BIN)/nats
export NATS_CLI
JAEGER := $(BIN)/jaeger
STATICCHECK := $(BIN)/staticcheck
GOREMAN := $(BIN)/goreman
NATS_SERVER := $(BIN)/nats-server
PROMTOOL := $(BIN)/promtool
# Debian's chromium, driven headless by the console's browser tests.
CHROMIUM := /usr/bin/chromium
# A CJK font, so that the browser tests' screenshots show 陈伟, not boxes.
CJK_FONT := /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc
# Root, or sudo without a password, installs Debian packages; empty otherwise.
APT := $(shell if [ "$$(id -u)" = 0 ]; then echo apt-get; elif sudo -n true 2>/dev/null; then echo sudo apt-get; fi)
# axe-core (from the npm registry), injected into pages by the console's
# browser tests (tests/console); test-only, never served.
AXE_VERSION := 4.14.1
AXE := $(CACHE)/npm/node_modules/axe-core/axe.min.js
export AXE_JS := $(AXE)

# Arguments for `make run`, e.g. make run ARGS="--port 4333 --downstream-url http://127.0.0.1:8080/capture"
ARGS ?=
# Events per phase of the ingest benchmark.
BENCH_EVENTS ?= 50000
# Quarantined events drained by the drain benchmark.
DRAIN_EVENTS ?= 100000
# Events of the sizing run (memory per process, bytes per stream).
SIZING_EVENTS ?= 100000
# Duration of each fuzz target in `make fuzz`.
FUZZTIME ?= 60s

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run the whole system on an embedded NATS server (127.0.0.1:4222, store in ./data)
	$(GO) build -o bin/deadletter ./services/deadletter/cmd/deadletter
	./bin/deadletter run $(ARGS)

# Where `make backup` writes and `make restore` reads a backup.
BACKUP_DIR ?= backups/$(shell date -u +%Y%m%dT%H%M%SZ)
# The new store directory `make restore` fills (then: make run ARGS="--data-dir $(RESTORE_DATA_DIR)").
RESTORE_DATA_DIR ?= data-restored

.PHONY: backup
backup: ## Back up make run's store while it runs: every stream and bucket through JetStream snapshots, manifest signed with the audit key and written last (BACKUP_DIR, default backups/<UTC time>; docs/operations/backup.md)
	$(GO) run ./services/dlqctl backup $(BACKUP_DIR) --credentials data/credentials.json --signing-key anchors/audit-signing.nk

.PHONY: restore
restore: ## Restore BACKUP_DIR offline into a new store RESTORE_DATA_DIR (its manifest and parts checked first); then make run ARGS="--data-dir RESTORE_DATA_DIR" and dlqctl verify proves it
	$(GO) run ./services/dlqctl restore $(BACKUP_DIR) --credentials data/credentials.json --signing-key anchors/audit-signing.nk --data-dir $(RESTORE_DATA_DIR)
	cp -p data/credentials.json $(RESTORE_DATA_DIR)/

# Arguments for `make cluster`, e.g. make cluster CLUSTER_ARGS="--downstream-url http://127.0.0.1:8080/capture"
CLUSTER_ARGS ?=

.PHONY: cluster
cluster: $(GOREMAN) ## On this machine: nats-server as 3 nodes from the generated kit (R3), 2 validators, 2 quarantiners, a redriver and an auditor, each its own process under goreman (store in .cache/cluster); Ctrl-C stops services, then nodes
	$(GO) build -o $(NATS_SERVER) github.com/nats-io/nats-server/v2
	$(GO) build -o bin/ ./services/validator/cmd/validator ./services/quarantiner/cmd/quarantiner ./services/redriver/cmd/redriver ./services/auditor/cmd/auditor ./services/deadletter/cmd/provision ./services/deadletter/cmd/deadletter
	./bin/deadletter cluster --bin bin --nats-server $(NATS_SERVER) --goreman $(GOREMAN) $(CLUSTER_ARGS)

$(GOREMAN): deploy/tools/goreman/go.mod deploy/tools/goreman/go.sum
	cd deploy/tools/goreman && GOWORK=off $(GO) build -o $(GOREMAN) github.com/mattn/goreman

.PHONY: demo
demo: ## The outage story in one command: 1,000 events, a downstream outage, triage, drain, verify
	$(GO) run ./services/deadletter/cmd/deadletter demo

# TIMED_TESTS measure a pace (a drain at 50/s within ±5 %; a resumed
# drain's reported rate within ±10 % of LEDGER's): they run after the
# others, alone, so that no other test package shares the two cores.
TIMED_TESTS := ^(TestRateAndConcurrency|TestDrainResumedAfterCrashAddsUp)$$

# The build tag of the live failpoints (shared/failpoint): the tests that
# arm one in-process (tests/approval) need it; production builds leave it
# out (the last line of test runs failpoint's production build, which
# refuses every point). The chaos suite builds its binaries with it itself.
TEST_TAGS := failpoint

.PHONY: test
test: chromium tools jaeger axe promtool kit-test ## Every test, with the race detector, against real embedded NATS servers, a real Jaeger and Chromium; installs or builds what it needs first
	$(GO) test -race -count=1 -timeout 40m -tags $(TEST_TAGS) -skip '$(TIMED_TESTS)' work
	$(GO) test -race -count=1 -timeout 10m -tags $(TEST_TAGS) -run '$(TIMED_TESTS)' ./tests/redrive/
	$(GO) test -count=1 ./shared/failpoint/ ./shared/config/

.PHONY: test-short
test-short: ## The fast tier, the default while working: every package with -short (embedded NATS servers; what needs Jaeger, Chromium, a cluster or minutes is skipped, natstest.Long), no race detector
	$(GO) test -short -count=1 -timeout 10m -tags $(TEST_TAGS) -skip '$(TIMED_TESTS)' work

# Distinct events of the full chaos run.
CHAOS_EVENTS ?= 100000

.PHONY: export-check
export-check: ## Convert an inspection export's XLSX (all three domains) with LibreOffice headless, installing libreoffice-calc when root or sudo can; fails on any complaint, missing sheet or repeated column name
	GO=$(GO) tests/exportcheck/libreoffice.sh

.PHONY: chaos
chaos: ## Full chaos run: 100,000 events (CHAOS_EVENTS), services as processes, every service SIGKILLed 3 times, the server SIGTERMed and SIGKILLed, then a 3-node R3 cluster losing its EVENTS leader; prints the figures, fails on anything lost or doubled
	$(GO) run ./tests/chaos/cmd/chaos -events $(CHAOS_EVENTS) -kills 3 -phases 1,3

.PHONY: kit-test
kit-test: promtool ## Check the deployment files (systemd, Compose, Kubernetes, Dockerfile) against the generated kit, and the alert rules with promtool (deploy/kittest, its own module)
	cd deploy/kittest && GOWORK=off $(GO) test -count=1 ./...

.PHONY: tools
tools: $(NATS_CLI) ## Build the pinned nats CLI (natscli v0.5.0) into .cache/bin

.PHONY: promtool
promtool: $(PROMTOOL) ## Build promtool (prometheus v0.316.0, pinned in deploy/tools/promtool) into .cache/bin for the alert rule tests

$(PROMTOOL): deploy/tools/promtool/go.mod deploy/tools/promtool/go.sum
	cd deploy/tools/promtool && GOWORK=off $(GO) build -o $(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool

# install installs Debian package $(1) with apt-get as root or with sudo,
# or stops with what to do; $(2) says why the tests need it.
define install
{ if [ -z "$(APT)" ]; then echo "$(1) is missing: $(2). Install Debian's $(1) package (apt-get install $(1)) as root, then run make again." >&2; exit 1; fi; \
  echo "installing Debian's $(1) ($(2))"; \
  $(APT) update -qq && DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq --no-install-recommends $(1) >/dev/null; }
endef

.PHONY: chromium
chromium: ## Install Debian's chromium for the console's browser tests (as root or with sudo), unless /usr/bin/chromium is there
	@test -x $(CHROMIUM) || $(call install,chromium,the console's browser tests drive a headless Chromium)
	@test -e $(CJK_FONT) || $(call install,fonts-noto-cjk,the console's screenshots show names such as 陈伟)

$(STATICCHECK): deploy/tools/staticcheck/go.mod deploy/tools/staticcheck/go.sum
	cd deploy/tools/staticcheck && GOWORK=off $(GO) build -o $(STATICCHECK) honnef.co/go/tools/cmd/staticcheck

$(NATS_CLI): deploy/tools/go.mod deploy/tools/go.sum
	cd deploy/tools && GOWORK=off $(GO) build -o $(NATS_CLI) github.com/nats-io/natscli/nats

.PHONY: axe
axe: $(AXE) ## Install axe-core (npm, pinned AXE_VERSION) into .cache/npm for the console's browser tests

$(AXE): Makefile
	@command -v npm >/dev/null || $(call install,npm,Node.js and npm fetch axe-core from the npm registry for the console's browser tests)
	npm install --no-save --no-audit --no-fund --no-package-lock --prefix $(CACHE)/npm axe-core@$(AXE_VERSION)
	touch $(AXE)

.PHONY: jaeger
jaeger: $(JAEGER) ## Build Jaeger v2 (v1.75.0, API only: its Go module has no UI) into .cache/bin once (~7 min cold, ~2 GB RAM)

$(JAEGER): deploy/tools/go.mod deploy/tools/go.sum
	cd deploy/tools && GOWORK=off $(GO) build -o $(JAEGER) github.com/jaegertracing/jaeger/cmd/jaeger

.PHONY: jaeger-run
jaeger-run: $(JAEGER) ## Run the API-only Jaeger of the tests in memory on 127.0.0.1 (OTLP 4317/4318, query API on 16686)
	$(JAEGER) --config deploy/jaeger/config.yaml

.PHONY: bench
bench: ## Benchmarks: validation per domain, ingest vs raw JetStream and the store-bound floor, ingest through the whole stack and the publisher's import (sync always), ingest and drain on a 3-node R3 cluster next to one server (services as processes), tracing's cost (untraced and 100 %-traced phases in ABBA order; the publisher traced elsewhere, then in this process too), quarantine latency, the drain's store-bound floor, the server's write primitives (async publish, atomic batches by size, fast batch; tests/bench/writepath), what a consumer's acks cost sync-always publishing (explicit, AckAll, none; tests/bench/ackcost), audit throughput, a person's command during a 300-connect failed-login flood against the floor of a flood that costs no password check (tests/bench/flood), the inspection export of 100,000 records (JSONL, CSV, XLSX and the offline verify), resume times of each restarted service under a 500 events/s load (start-up, first work, in-flight redelivered), sizing (peak RSS per process and bytes per stream after SIZING_EVENTS events and a drain), EPCIS documents of 10,000 and 100,000 events against a batching single-event producer (sync always; the validator's peak RSS; tests/bench/document); last, issue #17's goals in one run (tests/bench/goals: sync-always ingest vs raw with async and batching producers and after a crash, R3 ingest vs raw R3, no-fsync ingest vs the Watermill peer in ../shared/peers/watermill-bench and vs raw, drain of DRAIN_EVENTS in both fsync modes, CPU per event, open-loop p99 publish → LEDGER) and its table
	$(GO) test -run '^$$' -bench . -benchmem ./shared/gate/ ./shared/domain/... ./shared/record/
	$(GO) run ./tests/bench/ingest -n $(BENCH_EVENTS) -floor
	$(GO) run ./tests/bench/stack -n 5000 -sync-always -rounds 3
	$(GO) run ./tests/bench/cluster -n 10000 -rounds 2
	$(GO) run ./tests/bench/ingest -n $(BENCH_EVENTS) -trace-sink -trace-ab 2 -remote-publisher
	$(GO) run ./tests/bench/ingest -n $(BENCH_EVENTS) -trace-sink -trace-ab 2
	$(GO) test -run '^$$' -bench Quarantine -benchtime 1x ./services/quarantiner/
	$(GO) run ./tests/bench/drain -n $(DRAIN_EVENTS) -floor
	$(GO) run ./tests/bench/drain -n $(DRAIN_EVENTS) -floor -floor-compute
	$(GO) run ./tests/bench/writepath -n 10000 -rounds 2
	$(GO) run ./tests/bench/ackcost -n 10000 -rounds 8
	$(GO) run ./tests/bench/audit
	$(GO) run ./tests/bench/flood -rounds 5
	$(GO) run ./tests/bench/export -n 100000
	$(GO) run ./tests/bench/resume -rate 500 -rounds 3
	$(GO) run ./tests/bench/sizing -n $(SIZING_EVENTS)
	$(GO) run ./tests/bench/document -n 10000,100000
	$(GO) run ./tests/bench/goals -n $(BENCH_EVENTS) -drain-n $(DRAIN_EVENTS)

.PHONY: fuzz
fuzz: ## Fuzz each domain's validation for FUZZTIME (default 60s) each
	$(GO) test -run '^$$' -fuzz FuzzGatePharmacy -fuzztime $(FUZZTIME) ./shared/domain/pharmacy/
	$(GO) test -run '^$$' -fuzz FuzzGateDSCSA -fuzztime $(FUZZTIME) ./shared/domain/dscsa/
	$(GO) test -run '^$$' -fuzz FuzzGateFsma -fuzztime $(FUZZTIME) ./shared/domain/fsma/

.PHONY: build
build: ## Build every binary into bin/
	$(GO) build -o bin/ ./services/deadletter/cmd/deadletter ./services/deadletter/cmd/provision \
		./services/validator/cmd/validator ./services/quarantiner/cmd/quarantiner \
		./services/redriver/cmd/redriver ./services/auditor/cmd/auditor ./services/console/cmd/console
	$(GO) build -o bin/ ./services/dlqctl

.PHONY: vet
vet: $(STATICCHECK) ## go vet, staticcheck (v0.8.2, pinned in deploy/tools/staticcheck) and gofmt over the workspace
	$(GO) vet work
	$(GO) vet -tags $(TEST_TAGS) ./shared/failpoint/
	$(STATICCHECK) work
	$(STATICCHECK) -tags $(TEST_TAGS) ./shared/failpoint/
	@test -z "$$(gofmt -l services shared schemas tests)" || (gofmt -l services shared schemas tests; exit 1)

.PHONY: tidy
tidy: ## go mod tidy in every module of the workspace
	@for m in schemas shared services/* tests; do (cd $$m && $(GO) mod tidy) || exit 1; done

.PHONY: clean
clean: ## Remove build output and the ./data store (keeps the tool cache)
	rm -rf bin data
