package collector

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestAppMetricsBounded: a target that writes 4 million distinct names and
// one 200 MB line does not make the recorder hold them. At most
// maxAppMetricNames names are kept, the rest and the long line are counted
// and reported, and the process's peak RSS while reading all of it stays
// under 100 MB (the kernel's high-water mark, reset just before; not a
// clock). Before the bound, the recorder read the whole file into memory.
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
	if len(got) != maxAppMetricNames || got["m1"] != 2 {
		t.Errorf("first poll: %d names, m1=%v; want %d and the later value 2", len(got), got["m1"], maxAppMetricNames)
	}
	// The unterminated last line names a new metric: over the bound too.
	if len(got2) != 0 || a.overNames != names-maxAppMetricNames+1 {
		t.Errorf("final poll %v, %d lines over the name bound; want none and %d", got2, a.overNames, names-maxAppMetricNames+1)
	}
	if a.long != 1 {
		t.Errorf("%d long lines counted, want 1", a.long)
	}
	msg := a.warning()
	for _, want := range []string{"longer than 4096 bytes", "beyond the first 1000"} {
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
