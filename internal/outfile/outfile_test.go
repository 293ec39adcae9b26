package outfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCheckRefusesNonRegular: a device node, a FIFO, a socket and a
// directory are refused with ErrNotRegular and a message naming what the
// path is; all of them are private nodes under a temp dir, never /dev.
func TestCheckRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{fifo: "a FIFO", sub: "a directory", filepath.Join(dir, "nodir", "x"): "no such file"}
	if os.Geteuid() == 0 {
		null := filepath.Join(dir, "null")
		// A private character device with /dev/null's numbers (1, 3).
		if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatal(err)
		}
		cases[null] = "a character device"
	} else {
		t.Log("not root: the character device case needs mknod (root)")
	}
	for path, want := range cases {
		err := Check(path)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%s) = %v, want ErrNotRegular naming %q", path, err, want)
		}
		if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Write(%s) = %v, want ErrNotRegular", path, err)
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was changed: %v %v", fi, err)
	}
	if fi, err := os.Lstat(sub); err != nil || !fi.IsDir() {
		t.Errorf("the directory was changed: %v %v", fi, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(cases)-1 {
		t.Errorf("refused writes left files behind: %v", entries)
	}
}

// TestWriteKeepsOld: an existing regular file becomes FILE.old; a failed
// render changes nothing and leaves no temporary file.
func TestWriteKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.html")
	write := func(s string) error {
		return Write(path, func(w io.Writer) error { _, err := io.WriteString(w, s); return err })
	}
	if err := write("one"); err != nil {
		t.Fatal(err)
	}
	if err := write("two"); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, path); got != "two" {
		t.Errorf("%s = %q, want two", path, got)
	}
	if got := readString(t, path+OldSuffix); got != "one" {
		t.Errorf("%s = %q, want one", path+OldSuffix, got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != Mode {
		t.Errorf("mode %v, want %v", fi.Mode().Perm(), os.FileMode(Mode))
	}
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error { io.WriteString(w, "half"); return boom })
	if !errors.Is(err, ErrWrite) || !errors.Is(err, boom) {
		t.Errorf("failed render: %v, want ErrWrite wrapping the render's error", err)
	}
	if got := readString(t, path); got != "two" {
		t.Errorf("after a failed render %s = %q, want two", path, got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("files after a failed render: %v, want out.html and out.html.old", entries)
	}
}

// TestPlantedSymlinks: symlinks planted at the predictable names FILE.tmp,
// FILE.partial and FILE.old never lead a write to their target.
func TestPlantedSymlinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "out")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{".tmp", ".partial", OldSuffix} {
		if err := os.Symlink(victim, path+s); err != nil {
			t.Fatal(err)
		}
	}
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, ".partial")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("newer")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, victim); got != "precious" {
		t.Errorf("victim = %q: a planted symlink was followed", got)
	}
	if got := readString(t, path); got != "newer" {
		t.Errorf("out = %q, want newer", got)
	}
	if got := readString(t, path+OldSuffix); got != "new" {
		t.Errorf("out.old = %q, want new (the symlink at out.old itself replaced)", got)
	}
}

// TestCommitRefusesSwappedPath: a path that became a directory while the
// output was written is not replaced; the data stays in the temp file.
func TestCommitRefusesSwappedPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	f, err := Create(path, ".partial")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("data")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	err = f.Commit()
	if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), f.TempPath()) {
		t.Fatalf("Commit = %v, want ErrNotRegular naming %s", err, f.TempPath())
	}
	if got := readString(t, f.TempPath()); got != "data" {
		t.Errorf("temp = %q, want data kept", got)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
