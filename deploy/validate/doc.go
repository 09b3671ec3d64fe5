// Package validate checks paylock's Prometheus alerting rules and Grafana
// dashboard with Prometheus's own rule and PromQL parsers, and renders the
// Helm chart in deploy/helm/paylock with Helm's engine and validates every
// object with kubeconform (docs/helm.md). It is a separate module so that
// paylock does not depend on Prometheus's server code, Helm or kubeconform;
// run it with
//
//	cd deploy/validate && GOFLAGS=-mod=mod go test ./...
//
// (scripts/test.sh does). That every metric referenced is one paylock
// exports, and that the chart's renders agree with the binary, is checked in
// package cli's tests.
package validate
