// Package archtest holds the test that keeps docs/architecture.md true: the
// files, directories and functions it names exist where it says, its
// import diagram is the code's, its import rules hold, no production
// function is longer than 80 lines and cmd/paylock stays a thin main; and
// the test that keeps CHANGELOG.md's upgrade notes complete: every
// migration of store/migrations and every forwarded type of schemas/ is
// named there. It has no code of its own; see archtest_test.go and
// changelog_test.go.
package archtest
