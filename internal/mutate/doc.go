// Command mutate checks that paylock's tests fail when the code is wrong.
// Each entry of its table (mutations.go) names a guarantee, a
// file, an exact snippet of that file, the snippet's wrong replacement and
// the tests that must notice. For each, mutate swaps the changed file in
// with go test -overlay (no copy of the module, nothing on disk changes),
// runs the named tests (-count=1, no -race, a short timeout, CI=true so that
// a missing server fails instead of skipping) and reports the mutation
// killed (a test failed) or survived (every test passed).
//
// A snippet that is not found exactly once in its file is an error: the
// code drifted and the entry must be rewritten against it. So is a
// mutation that does not compile, and tests that fail before any mutation
// (each distinct set of tests runs once unmutated first). Any survivor or
// error makes it exit non-zero; it prints each result and the total
// duration.
//
// Usage (from the module root; scripts/mutate.sh and make mutate run it):
//
//	go run ./internal/mutate [-run regexp] [-list] [-check] [-timeout 5m]
//
// -run selects mutations by id, -list prints the table, -check only checks
// that every snippet is found exactly once (TestEverySnippetIsFoundOnce
// runs it in every go test). The overlay reaches the test binaries that go
// test builds; a test that builds paylock itself (go build of cmd/paylock)
// does not see the mutation, so each entry names in-process tests.
package main
