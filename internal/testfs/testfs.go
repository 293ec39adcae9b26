// Package testfs writes the files of test fixtures: one helper that the
// tests of several packages (host, collector) build fixture hosts with.
package testfs

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes text to rel under dir, creating its directories; a
// failure fails the test.
func WriteFile(t testing.TB, dir, rel, text string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
