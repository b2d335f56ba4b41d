# etcdhook. The two commands a newcomer needs: `make run` (the hook server on :8080) and `make test`.
GO      ?= go
# Static binaries (the image has no libc), and the same setting for the tests, so that the binary and
# the tests share one build cache: with different settings a cold `make fixtures` after `make test`
# recompiled every dependency (4 minutes). The image's own build (make image) adds -trimpath.
export CGO_ENABLED := 0
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE   ?= ghcr.io/etcdhook/etcdhook:v0.1.0
LDFLAGS := -s -w -X main.version=$(VERSION)
# cloud.google.com/go/storage's opt-out of its gRPC transport's modules (the GCS store speaks its JSON API
# over HTTP): a 12.7 MB smaller binary, 5.5 MiB less resident in every process (docs/performance.md).
# The image's build (cmd/etcdhook/image -tags) and the Dockerfile use the same tag.
GOTAGS  := disable_grpc_modules
# A count of executions, not a duration: a duration also pays for the baseline coverage of the seed
# corpus (every fixture, about 20 s on 2 cores), and a run whose baseline used up the time failed with
# "context deadline exceeded" without any failing input (CI at aae6fd5, 581 seeds).
FUZZTIME ?= 2000x

.PHONY: build run test chart rules servers unit fuzz fixtures bench loadtest backupload simulate timings image sbom lint e2e-local e2e plugin-dist clean

build:
	$(GO) build -tags '$(GOTAGS)' -ldflags '$(LDFLAGS)' -o bin/etcdhook ./cmd/etcdhook

# The hook server on :8080, ready for: curl --json @hooks/testdata/sync/new-cluster.request.json localhost:8080/sync
run: build
	./bin/etcdhook serve --addr :8080 --image $(IMAGE)

# Everything `go test` covers (decisions, fixtures through the handler, invariants, the agent and member
# operations against real etcd 3.5, 3.6 and 3.7), then a short fuzz run of the request path. Each part
# prints its time: on a cold machine the tools built from source (helm, kustomize, promtool, MinIO)
# are most of it. chart and rules come after unit, so that CI can build their tools in the background
# meanwhile (.ci/run; the scripts lock, so a part that asks first waits for that build).
TEST_PARTS = lint servers unit chart rules fuzz
test:
	@for part in $(TEST_PARTS); do start=$$(date +%s); $(MAKE) --no-print-directory $$part || exit 1; \
	  echo "== make test: $$part took $$(( $$(date +%s) - start ))s"; done

# -parallel 3: the membership scenarios run their three etcd versions side by side (forEachVersionParallel);
# they mostly wait on etcd's fsyncs and elections, so three clusters on two cores take about a third of
# the time one after another did, and go test's default (GOMAXPROCS, 2 in CI) would run only two.
unit:
	$(GO) test -count=1 -timeout 30m -parallel 3 ./...

# The object stores the backup tests write to (real MinIO and fake-gcs-server), built once into bin/tools
# by scripts/gotool.sh before the tests ask for them, so that the build and its time show in the log.
servers:
	@for s in minio fake-gcs-server; do start=$$(date +%s); scripts/gotool.sh $$s >/dev/null; echo "$$s ready ($$(( $$(date +%s) - start ))s)"; done

# The alerts of manifests/monitoring, unit-tested by promtool (built once into bin/tools by
# scripts/promtool.sh): the PrometheusRule's groups are written out as the plain rule file promtool reads.
rules:
	$(GO) run ./manifests/monitoring/tests/rulesfile manifests/monitoring/prometheusrule.yaml manifests/monitoring/tests/rules.gen.yaml
	scripts/promtool.sh check rules manifests/monitoring/tests/rules.gen.yaml
	scripts/promtool.sh test rules manifests/monitoring/tests/*_test.yaml

# The Helm chart and the install kustomization: helm lint and helm template with default values, then
# charts/chart_test.go (the chart renders what manifests/ renders; install/ is Metacontroller's release
# plus manifests/). helm and kustomize are built, pinned, into bin/tools by scripts/helm.sh and
# scripts/kustomize.sh the first time. Before unit in test:, which runs charts/chart_test.go again.
chart:
	bash scripts/helm.sh lint --strict charts/etcdhook
	bash scripts/helm.sh template etcdhook charts/etcdhook --namespace etcdhook-system > /dev/null
	bash scripts/kustomize.sh build install > /dev/null
	$(GO) test -count=1 ./charts/

# A failure found is minimised for at most 5 s, so it is reported with its input (and saved under
# hooks/testdata/fuzz) instead of running out the fuzz time as "context deadline exceeded".
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzSync -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./hooks/
	$(GO) test -run '^$$' -fuzz FuzzBoundCheck -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./api/
	$(GO) test -run '^$$' -fuzz FuzzParseReport -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./api/

# Every fixture through a real `etcdhook serve`, with curl.
fixtures: build
	bash e2e/fixtures.sh bin/etcdhook

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./hooks/

# The hook and a JSON-only floor server on 127.0.0.1, each in its own process, under open-loop load
# (100, 200, 400 req/s and twice the hook's capacity, 5 s each; about 100 s in all): prints the Markdown
# tables of the README's Load section. LOADTEST_FLAGS passes flags (go run ./cmd/loadtest -h).
LOADTEST_FLAGS ?=
loadtest:
	$(GO) build -o bin/loadtest ./cmd/loadtest
	./bin/loadtest $(LOADTEST_FLAGS)

# A fleet against one hook replica, at most 60 s (cmd/loadtest -simulate): 1000 idle 9-member clusters
# at 0.1 sync/s and 50 scaling ones at 2 sync/s, open loop, each replaying its recorded request; prints
# the README's simulation table and how many clusters a replica serves. SIMULATE_FLAGS passes flags
# (-idle-clusters, -busy-clusters, -idle-rate, -busy-rate, -sim-duration, ...).
SIMULATE_FLAGS ?=
# Continuous backup on this machine (issue 27): the writer's cost at 200 and 2,000 writes/s on a 1 GiB
# database, the restore time of a snapshot plus an hour of revisions at 200 writes/s, and point accuracy
# over a 10-minute run (about 20 minutes; docs/performance.md keeps the run of record).
backupload: build
	$(GO) run ./cmd/backupload -etcdhook bin/etcdhook -minio $$(scripts/gotool.sh minio)

simulate:
	$(GO) build -o bin/loadtest ./cmd/loadtest
	./bin/loadtest -simulate $(SIMULATE_FLAGS)

# Membership scenarios against real etcd 3.5 and 3.6, writing each step's timing, failed writes and
# write latency to membership/TIMINGS.md.
timings:
	ETCDHOOK_TIMINGS=$(CURDIR)/membership/TIMINGS.md $(GO) test -count=1 -timeout 30m -run 'TestMembership' ./membership/

# The image without Docker (cmd/etcdhook/image, with go-containerregistry): etcdhook cross-built for each
# of IMAGE_PLATFORMS, each image FROM scratch (the binary at /etcdhook, nonroot 65532, /tmp), in one OCI
# index. Writes bin/image/oci/ (the OCI layout), bin/image/etcdhook-linux-<this machine's arch>.tar (a
# docker-archive: docker load, ctr images import, localkube image import) and bin/image/digest, and
# prints the digest. Every time in the image is the commit's (SOURCE_DATE_EPOCH), so the same commit
# and Go version give the same digest anywhere. PUSH=REF also pushes the index to REF with `docker
# login`'s credentials (the release workflow does). `docker build .` (Dockerfile) still works with Docker.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
PUSH ?=
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
image:
	$(GO) run ./cmd/etcdhook/image -tag $(IMAGE) -platforms $(IMAGE_PLATFORMS) -tags '$(GOTAGS)' -ldflags '$(LDFLAGS)' -version $(VERSION) \
	  -revision "$$(git rev-parse HEAD 2>/dev/null)" -epoch $(SOURCE_DATE_EPOCH) -out bin/image $(if $(PUSH),-push $(PUSH))

# The release's SBOM: the Go modules linked into etcdhook, with their licences, as CycloneDX JSON in
# dist/ (cyclonedx-gomod, built pinned into bin/tools by scripts/gotool.sh). cyclonedx-gomod reads the
# module's version from the checkout's tag with go-git, which opens a clone but not a `git worktree`.
sbom:
	mkdir -p dist
	GOOS=linux GOFLAGS=-tags=$(GOTAGS) "$$(scripts/gotool.sh cyclonedx-gomod)" app -json -licenses -main cmd/etcdhook -output dist/etcdhook_$(VERSION).cdx.json .

# The kubectl plugin's krew release in dist/, built by cmd/kubectl-etcd/dist: kubectl-etcd cross-built
# (CGO_ENABLED=0, -trimpath) for linux and darwin on amd64 and arm64 and for windows/amd64, one
# kubectl-etcd_<version>_<os>_<arch>.tar.gz each (the binary and LICENSE), sha256sums.txt, and etcd.yaml:
# cmd/kubectl-etcd/krew.yaml rendered with each archive's release URL and sha256, checked as krew checks
# a manifest. PLUGIN_VERSION is the release tag (krew wants vX.Y.Z, which VERSION's git describe is not).
# Install: kubectl krew install --manifest=dist/etcd.yaml --archive=dist/kubectl-etcd_<version>_<os>_<arch>.tar.gz
PLUGIN_VERSION ?= v0.1.0
plugin-dist:
	$(GO) run ./cmd/kubectl-etcd/dist -version $(PLUGIN_VERSION) -out dist -go $(GO)

# gofmt, go vet, and actionlint on .github/workflows (built pinned into bin/tools by scripts/gotool.sh;
# it runs shellcheck on the workflows' scripts where shellcheck is installed, and skips that otherwise).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	$(GO) vet ./...
	bash scripts/actionlint.sh

# The e2e suite on the local cluster (localkube) under the real Metacontroller v4.17.2: CI's tier
# (every scenario but the fleet and the 5-member recovery), and the full tier (those too, and first, alone,
# etcdhook upgraded under running clusters from the previous release, downgraded and upgraded again:
# TestUpgradeEtcdhook). E2E_UPGRADE_FROM is that release, the commit docs/operations.md §11 names as the
# release before this one (e2e/local.sh checks that they agree); the next release changes both.
E2E_UPGRADE_FROM ?= efde95f
e2e-local:
	E2E_SKIP='^TestFleet$$|^TestRecoverFromSurvivor$$/^5-lose-3$$' bash e2e/local.sh
e2e:
	E2E_UPGRADE_FROM=$(E2E_UPGRADE_FROM) bash e2e/local.sh

clean:
	rm -rf bin dist
