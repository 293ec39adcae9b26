package collector

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestAppMetricsBounded: a target that writes 4 million distinct names and
// one 200 MB line does not make the recorder hold them, nor read them all
// in one window. At most maxAppMetricNames names are kept, the rest are
// counted; a poll reads at most maxAppMetricsPoll bytes, then the file's
// newest lines, and counts what it skipped; the process's peak RSS while
// reading stays under 100 MB (the kernel's high-water mark, reset just
// before; not a clock). Before the bounds, the recorder read the whole
// file into memory, and then the whole file every window.
func TestAppMetricsBounded(t *testing.T) {
	dir := t.TempDir()
	a, err := newAppMetrics(filepath.Join(dir, "r.rec"), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	const names = 4_000_000
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range names {
		fmt.Fprintf(w, "m%d 1\n", i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// One 200 MB line: a hole in the file reads as 200 MB of zero bytes
	// without a newline, and costs no disk.
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(fi.Size() + 200<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\nm1 2\nlast 3"); err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.GC()
	debug.FreeOSMemory()
	// Writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
	base := peakRSS(t)
	runtime.ReadMemStats(&before)
	got := a.poll(false)
	got2 := a.poll(true)
	runtime.ReadMemStats(&after)
	peak := peakRSS(t)

	if len(a.final) != maxAppMetricNames {
		t.Errorf("%d names kept, want %d", len(a.final), maxAppMetricNames)
	}
	// The first poll read the first MB of names, then jumped to the end,
	// where m1 was written again.
	if len(got) != maxAppMetricNames || got["m1"] != 2 {
		t.Errorf("first poll: %d names, m1=%v; want %d and the later value 2", len(got), got["m1"], maxAppMetricNames)
	}
	if a.skipped < 200<<20 {
		t.Errorf("%d bytes skipped, want the 200 MB line and most of the names", a.skipped)
	}
	// The unterminated last line names a new metric: over the bound too.
	if len(got2) != 0 || a.overNames == 0 {
		t.Errorf("final poll %v, %d lines over the name bound; want none and some", got2, a.overNames)
	}
	msg := a.warning()
	for _, want := range []string{"bytes skipped", "beyond the first 1000"} {
		if !strings.Contains(msg, want) {
			t.Errorf("warning %q does not say %q", msg, want)
		}
	}
	if peak > 100<<20 {
		t.Errorf("peak RSS while reading 260 MB of metrics: %d MB (from %d MB), want under 100 MB", peak>>20, base>>20)
	}
	t.Logf("peak RSS %d MB (from %d MB); %d MB allocated in all, short-lived", peak>>20, base>>20, (after.TotalAlloc-before.TotalAlloc)>>20)
}

// peakRSS is the process's VmHWM in bytes.
func peakRSS(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// TestAppMetricsSparse: a metrics file truncated to 2 TB (a hole, no
// disk) is not read through: a poll reads at most maxAppMetricsPoll bytes
// and the file's last chunk, whatever its size, and a later poll sees
// lines written after it.
func TestAppMetricsSparse(t *testing.T) {
	dir := t.TempDir()
	a, err := newAppMetrics(filepath.Join(dir, "r.rec"), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	if err := os.Truncate(a.path, 2<<40); err != nil {
		t.Skipf("this file system cannot hold a 2 TB sparse file: %v", err)
	}
	if got := a.poll(false); len(got) != 0 {
		t.Errorf("a hole gave metrics %v", got)
	}
	at, err := a.f.Seek(0, io.SeekCurrent)
	if err != nil {
		t.Fatal(err)
	}
	if at != 2<<40 || a.skipped < 2<<40-2*maxAppMetricsPoll {
		t.Errorf("after one poll: at byte %d, %d skipped; want the end and nearly all of it skipped", at, a.skipped)
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\nops 7\n"); err != nil {
		t.Fatal(err)
	}
	if got := a.poll(true); got["ops"] != 7 {
		t.Errorf("after the hole: %v, want ops 7", got)
	}
}
