package testkit

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// Logger returns the logger for the code under test: text on stderr when
// the tests run with -v and PAYLOCK_TEST_LOGS set, else one that discards.
func Logger() *slog.Logger {
	if testing.Verbose() && os.Getenv("PAYLOCK_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// LogBuffer keeps what is written to it, for a test to read or wait on; it
// is safe for the goroutines of the code under test. The zero value is
// ready to use.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Contains reports whether s was written.
func (l *LogBuffer) Contains(s string) bool { return strings.Contains(l.String(), s) }

// Logger returns a JSON logger (every level) writing to l.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
