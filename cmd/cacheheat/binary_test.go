package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The end-to-end tests run the real binary (records need their own
// process: signals, the command gate). It is built once per test run.
var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// cacheheatBinary returns the path of a freshly built cacheheat, or of
// $CACHEHEAT_TEST_BIN where it is set: a machine without a Go toolchain
// (the 16-CPU device) runs a test binary built elsewhere (go test -c)
// against a cacheheat built from the same tree.
func cacheheatBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("CACHEHEAT_TEST_BIN"); p != "" {
			binPath = p
			return
		}
		binDir, binErr = os.MkdirTemp("", "cacheheat-test-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "cacheheat")
		var out []byte
		if out, binErr = exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); binErr != nil {
			binErr = &buildError{binErr, string(out)}
		}
	})
	if binErr != nil {
		t.Fatalf("building cacheheat: %v", binErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }
