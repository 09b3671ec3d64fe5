.PHONY: test run build vet

test: ## vet, gofmt and go test -race against real Redis and Postgres (started if needed)
	scripts/test.sh

build:
	go build ./...

vet:
	go vet ./...

run: ## run paylock locally (starts throwaway Postgres/Redis when none answer)
	scripts/run.sh
