// Package archtest holds the test that keeps docs/architecture.md true: the
// files, directories and functions it names exist where it says, its
// import diagram is the code's, its import rules hold, no production
// function is longer than 80 lines and cmd/paylock stays a thin main. It
// has no code of its own; see archtest_test.go.
package archtest
