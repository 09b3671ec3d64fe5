// Package validate checks paylock's Prometheus alerting rules and Grafana
// dashboard with Prometheus's own rule and PromQL parsers. It is a separate
// module so that paylock does not depend on Prometheus's server code; run it
// with
//
//	cd deploy/validate && GOFLAGS=-mod=mod go test ./...
//
// (scripts/test.sh does). That every metric referenced is one paylock
// exports is checked in package cli's tests.
package validate
