package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestHelpGolden pins the help text users read: the command list and every
// command's flags and examples. Refresh with go test -run Help -update.
func TestHelpGolden(t *testing.T) {
	names := []string{""}
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		args := []string{"--help"}
		file := "help.golden"
		if n != "" {
			args = []string{n, "--help"}
			file = "help-" + n + ".golden"
		}
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Errorf("cacheheat %v: exit %d, stderr %q", args, code, stderr.String())
			continue
		}
		if stdout.Len() == 0 {
			t.Errorf("cacheheat %v printed no help", args)
			continue
		}
		path := filepath.Join("testdata", file)
		if *update {
			if err := os.WriteFile(path, stdout.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run Help -update to create it)", err)
		}
		if !bytes.Equal(stdout.Bytes(), want) {
			t.Errorf("cacheheat %v differs from %s (go test -run Help -update to accept):\n%s", args, path, stdout.String())
		}
	}
}

// TestUsageErrors checks that an unknown command or flag exits 2 with a
// one-line hint.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"inspect", "--bogus"}, {}, {"record", "-F", "x"}} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("cacheheat %v: exit %d, want %d", args, code, exitUsage)
		}
		if len(args) > 0 && (bytes.Count(stderr.Bytes(), []byte("\n")) != 1 || !bytes.Contains(stderr.Bytes(), []byte("--help"))) {
			t.Errorf("cacheheat %v: stderr %q, want one line pointing at --help", args, stderr.String())
		}
	}
}
