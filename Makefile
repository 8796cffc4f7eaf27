# The two commands of the README: `make dev` runs the service on embedded defaults,
# `make test` runs every test. Both do all set-up first (hack/setup.sh, idempotent).
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := .cache/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)

.PHONY: dev test build lint setup fuzz image

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

dev: setup
	.cache/bin/datajobs dev --log-format text

test: setup
	@bash hack/test.sh

$(GOLANGCI_LINT):
	@mkdir -p .cache/tools
	GOBIN=$(CURDIR)/.cache/tools/gobin go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv .cache/tools/gobin/golangci-lint $(GOLANGCI_LINT)

lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...
