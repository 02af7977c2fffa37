# opkit developer entry points. `make test` is what CI runs (.ci/run).
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := $(CURDIR)/bin
GOLANGCI_LINT := bin/golangci-lint
CONTROLLER_GEN := bin/controller-gen
# Control-plane binaries: KUBEBUILDER_ASSETS if set, else built once into the
# user cache (~10-15 min cold on 2 cores, instant afterwards).
ASSETS_CMD := $(GO) run ./cmd/opkit-assets
TEST_FLAGS ?= -race -count=1 -timeout 30m
# Go modules in this repository. `./...` stops at a nested go.mod, so every
# target that vets, lints or tests code runs once per module in CODE_MODULES
# (the library; observability/otlp is its own module so that gRPC and the OTLP
# exporter stay out of the library's consumers' module graphs, and bench is
# its own module so that the peer libraries it measures, fluxcd/pkg/ssa, do
# too; it builds against this checkout through a replace). helm (Helm-chart
# operators) is its own module so that Helm stays out of the library's
# consumers' module graphs, and examples/chart, its example, is one too.
# tools/ only pins dev tools: it is tidy-checked, not tested.
CODE_MODULES := . observability/otlp bench helm examples/chart
MODULES := $(CODE_MODULES) tools

.PHONY: all test generate verify-generated promtool ansible assets vulncheck fmt-check tidy-check vet lint demo clean help

all: test

help: ## list targets
	@grep -E '^[a-z%-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

assets: ## build (or find) the control-plane binaries; prints their directory
	@$(ASSETS_CMD)

test: fmt-check tidy-check verify-generated vet lint promtool ansible ## everything CI runs: format, go.mod tidiness, vet, lint, then all tests of every module with -race on a real control plane
	@dir=$$($(ASSETS_CMD)); echo "control-plane binaries: $$dir"; \
	for m in $(CODE_MODULES); do \
		echo "go test $$m"; (cd $$m && KUBEBUILDER_ASSETS="$$dir" $(GO) test $(TEST_FLAGS) ./...); \
	done

fmt-check: ## fail when gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

tidy-check: ## fail when `go mod tidy` would change go.mod or go.sum of any module (root, observability/otlp, bench, helm, examples/chart, tools)
	@for m in $(MODULES); do \
		if ! out=$$(cd $$m && $(GO) mod tidy -diff 2>&1); then \
			echo "$$m: go.mod/go.sum not tidy; run 'cd $$m && go mod tidy' and commit:"; echo "$$out"; exit 1; \
		fi; \
	done

# go vet compiles every dependency to read its export data. With -race (as
# the tests are built) that compile lands in the build cache under the same
# keys the tests use, so on a cold machine the race build is paid once, not
# once for vet and again for the tests. The only files with a race build
# constraint here set a raceEnabled constant, so the binaries tests build with
# go build (an example operator, the scaffolded project, the helm CLI) are
# built with -race too and reuse the same compile.
vet: ## go vet (built with -race, sharing the tests' compile), every module
	@for m in $(CODE_MODULES); do echo "go vet $$m"; (cd $$m && $(GO) vet -race ./...); done

$(GOLANGCI_LINT): tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && $(GO) build -o $(CURDIR)/$(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# golangci-lint loads its packages through `go list -export`, which compiles
# every dependency too; with -race in GOFLAGS it finds vet's (and the tests')
# race compile in the build cache instead of compiling the world again.
lint: $(GOLANGCI_LINT) ## golangci-lint v2 (pinned in tools/go.mod; loading with -race, sharing vet's compile), every module
	@flags="$$($(GO) env GOFLAGS) -race"; \
	for m in $(CODE_MODULES); do echo "golangci-lint $$m"; (cd $$m && GOFLAGS="$$flags" $(CURDIR)/$(GOLANGCI_LINT) run ./...); done

demo: ## run the webapp example operator on an embedded control plane (Ctrl-C to stop)
	$(GO) run ./examples/webapp $(DEMO_FLAGS)

clean: ## remove local tool binaries (not the control-plane cache)
	rm -rf $(BIN)

promtool: ## make sure promtool is installed (Debian's prometheus package); the observability tests run it
	@hack/ensure-promtool.sh >/dev/null

ansible: ## make sure ansible-playbook (Debian's ansible, with kubernetes.core) and python3-kubernetes are installed; the ansible package's and examples/playbook's tests run playbooks
	@hack/ensure-ansible.sh >/dev/null

$(CONTROLLER_GEN): tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && $(GO) build -o $(CURDIR)/$(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

generate: $(CONTROLLER_GEN) ## regenerate deepcopy, CRDs and RBAC from kubebuilder markers
	$(CONTROLLER_GEN) object paths=./examples/...
	$(CONTROLLER_GEN) crd:maxDescLen=400 paths=./examples/webapp/api/... output:crd:artifacts:config=examples/webapp/config/crd
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./examples/webapp/controller/... output:rbac:artifacts:config=examples/webapp/config/rbac
	$(CONTROLLER_GEN) crd:maxDescLen=400 paths=./examples/bucket/api/... output:crd:artifacts:config=examples/bucket/config/crd
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./examples/bucket/controller/... output:rbac:artifacts:config=examples/bucket/config/rbac
	$(CONTROLLER_GEN) crd:maxDescLen=400 paths=./examples/database/api/... output:crd:artifacts:config=examples/database/config/crd
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./examples/database/controller/... output:rbac:artifacts:config=examples/database/config/rbac
	$(CONTROLLER_GEN) crd:maxDescLen=400 paths=./examples/tenant/api/... output:crd:artifacts:config=examples/tenant/config/crd
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./examples/tenant/controller/... output:rbac:artifacts:config=examples/tenant/config/rbac
	$(CONTROLLER_GEN) crd:maxDescLen=400 paths=./examples/playbook/api/... output:crd:artifacts:config=examples/playbook/config/crd
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./examples/playbook/controller/... output:rbac:artifacts:config=examples/playbook/config/rbac
	$(CONTROLLER_GEN) webhook paths=./examples/webapp/controller/... output:webhook:artifacts:config=examples/webapp/config/webhook
	cd examples/chart && $(CURDIR)/$(CONTROLLER_GEN) object paths=./api/...
	cd examples/chart && $(CURDIR)/$(CONTROLLER_GEN) crd:maxDescLen=400 paths=./api/... output:crd:artifacts:config=config/crd
	cd examples/chart && $(CURDIR)/$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./controller/... output:rbac:artifacts:config=config/rbac

verify-generated: generate ## fail when generated files are not up to date
	@git diff --exit-code -- examples || { echo "generated files are stale: run 'make generate' and commit"; exit 1; }

# Install an example into the cluster of the current kubeconfig the
# kubebuilder way, with the kubectl the control-plane harness builds:
# install/uninstall apply or delete its CRDs (config/crd); deploy/undeploy the
# whole operator (config/default: namespace <example>-system, RBAC, Deployment,
# metrics Service; for webapp also the webhooks, which need cert-manager).
# Point the Deployment at your image first with
# `cd examples/<example>/config/manager && kustomize edit set image ghcr.io/opkit/<example>-operator=<image>`.
KUBECTL_K = dir=$$($(ASSETS_CMD)); "$$dir/kubectl"
# Pattern rules, not .PHONY: make skips implicit rules for phony targets.
install-%: ## install-<example> (webapp, bucket, database, tenant): apply the example's CRDs (kubectl apply -k examples/<example>/config/crd) to the current kubeconfig's cluster
	@$(KUBECTL_K) apply --server-side -k examples/$*/config/crd
uninstall-%: ## uninstall-<example>: delete the example's CRDs (and so every object of them)
	@$(KUBECTL_K) delete --ignore-not-found -k examples/$*/config/crd
deploy-%: ## deploy-<example>: deploy the operator (kubectl apply -k examples/<example>/config/default)
	@$(KUBECTL_K) apply --server-side -k examples/$*/config/default
undeploy-%: ## undeploy-<example>: delete everything deploy-<example> created, CRDs included
	@$(KUBECTL_K) delete --ignore-not-found -k examples/$*/config/default

# bench is also a directory: without .PHONY make would call it up to date.
.PHONY: bench bench-quick
# The command lives in the bench module, so it runs from bench/ (relative
# paths in BENCH_FLAGS, e.g. --cpuprofile, are relative to bench/).
bench: ## operator benchmark: ceiling vs kubebuilder-style baseline vs flux (fluxcd/pkg/ssa) vs opkit webapp, plus opkit sharding (~15-30 min on 2 cores); report in out/bench
	@dir=$$($(ASSETS_CMD)); cd bench && KUBEBUILDER_ASSETS="$$dir" $(GO) run ./cmd/opkit-bench --out $(CURDIR)/out/bench $(BENCH_FLAGS)

bench-quick: ## the same benchmark with small numbers (< 3 min), a smoke run; report in out/bench-quick
	@dir=$$($(ASSETS_CMD)); cd bench && KUBEBUILDER_ASSETS="$$dir" $(GO) run ./cmd/opkit-bench --out $(CURDIR)/out/bench-quick --quick $(BENCH_FLAGS)

vulncheck: ## govulncheck (pinned in tools/); needs network access to vuln.go.dev, so CI does not run it
	cd tools && $(GO) build -o $(CURDIR)/bin/govulncheck golang.org/x/vuln/cmd/govulncheck
	@for m in $(CODE_MODULES); do echo "govulncheck $$m"; (cd $$m && $(CURDIR)/bin/govulncheck ./...); done
