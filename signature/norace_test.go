//go:build !race

package signature_test

const raceEnabled = false
