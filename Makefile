.PHONY: test run build vet

test: ## vet, gofmt and go test -race against real Redis and Postgres (started if needed)
	scripts/test.sh

build:
	go build ./...

vet:
	go vet ./...
