# The two commands of the README: `make dev` runs the service on embedded defaults,
# `make test` runs every test. Both do their set-up first (hack/setup.sh, idempotent):
# make dev only what it runs.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := .cache/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)

.PHONY: dev test build lint setup fuzz image vuln

setup:
	@bash hack/setup.sh

build:
	go build -ldflags "-X github.com/datajobs/datajobs/internal/cli.Version=$$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/datajobs ./cmd/datajobs

# The datajobs image, without a Docker daemon (internal/image): written as an OCI layout to
# .cache/image and pushed to each reference of PUSH, e.g. make image PUSH=127.0.0.1:5000/datajobs:dev
# (inside hack/with-env.sh, by default to the test environment's registry).
PUSH ?= $(if $(DATAJOBS_TEST_REGISTRY),$(DATAJOBS_TEST_REGISTRY)/datajobs:dev)
image:
	go run ./hack/image $(foreach r,$(PUSH),--push $(r))

# make dev sets up only what datajobs dev runs (hack/setup.sh dev), not the tests' tools.
dev:
	@bash hack/setup.sh dev
	.cache/bin/datajobs dev --log-format text

test: setup
	@bash hack/test.sh

$(GOLANGCI_LINT):
	@mkdir -p .cache/tools
	GOBIN=$(CURDIR)/.cache/tools/gobin go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv .cache/tools/gobin/golangci-lint $(GOLANGCI_LINT)

# Every module of hack/modules.sh (the nested test modules too), with the root's .golangci.yml.
lint: $(GOLANGCI_LINT)
	@set -e; for m in $$(bash hack/modules.sh); do \
		echo "lint: $$m"; (cd $$m && $(CURDIR)/$(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...); \
	done

# Known vulnerabilities in the code the binary calls (govulncheck, pinned): the main module
# only, whose graph is the binary's (the test-only dependencies live in nested modules). It needs the Go
# vulnerability database at https://vuln.go.dev: where that is unreachable (an offline
# sandbox), it says so in one line and checks nothing, rather than failing or passing quietly.
GOVULNCHECK_VERSION := v1.9.0
GOVULNCHECK := .cache/tools/govulncheck-$(GOVULNCHECK_VERSION)

$(GOVULNCHECK):
	@mkdir -p .cache/tools
	GOBIN=$(CURDIR)/.cache/tools/gobin go install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
	mv .cache/tools/gobin/govulncheck $(GOVULNCHECK)

vuln: $(GOVULNCHECK)
	@out=$$($(GOVULNCHECK) ./... 2>&1); rc=$$?; \
	if [ $$rc -ne 0 ] && printf '%s' "$$out" | grep -qiE 'dial tcp|no such host|connection refused|i/o timeout|tls handshake|network is unreachable'; then \
		echo "make vuln: SKIPPED, nothing was checked: the Go vulnerability database https://vuln.go.dev is unreachable from here ($$(printf '%s' "$$out" | tail -n 1))"; \
		exit 0; \
	fi; \
	printf '%s\n' "$$out"; exit $$rc
