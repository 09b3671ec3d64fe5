.PHONY: test run build vet

test: ## vet, gofmt and go test -race against real Redis and Postgres (started if needed), then each fuzz target for a few seconds
	scripts/test.sh

build:
	go build ./...

vet:
	go vet ./...

run: ## run paylock locally (starts throwaway Postgres/Redis when none answer)
	scripts/run.sh

.PHONY: release image
release: ## static linux/amd64 and linux/arm64 binaries, their CycloneDX SBOMs and SHA256SUMS in dist/, each checked (docs/releasing.md)
	scripts/release.sh

image: ## the OCI image (Containerfile, FROM scratch) built with buildah from dist/'s binary, then started once to prove it runs
	scripts/image.sh

.PHONY: mutate
mutate: ## apply each listed mutation (internal/mutate) and run the tests that must fail; any survivor fails; writes docs/mutations.md (not in CI: it takes minutes)
	scripts/mutate.sh

.PHONY: bench bench-ladder
bench: ## measure paylock against its floors and write BENCHMARKS.md (about 11 minutes, the floor ladder included)
	scripts/bench.sh

bench-ladder: ## the floor ladder alone: each feature of the hot path against the bare floor and pgbench, printed (about 4 minutes)
	scripts/bench.sh --only ladder

.PHONY: chaos
chaos: ## kill, stop and cut paylock's replicas, Redis and Postgres under a PSP storm; write docs/reliability.md (about 3 minutes)
	scripts/chaos.sh

.PHONY: scale scale-short
scale: ## Redis Cluster, Sentinel and PgBouncer storms with failovers, from local binaries (full form, about 1.5 minutes once compiled)
	scripts/scale-test.sh

scale-short: ## the same, one failover per storm: the CI form (about 1 minute once compiled)
	scripts/scale-test.sh -short

.PHONY: ui-check
ui-check: ## River UI and the console on the admin listener in headless Chromium, through /admin/login; writes docs/img/river-ui*.png and docs/img/console-*.png
	scripts/ui-check.sh

.PHONY: trace-shot
trace-shot: ## one delivery's trace, exported over OTLP to a local receiver, drawn as a timeline by headless Chromium; writes docs/img/trace.png
	scripts/trace-shot.sh
