package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/symbolize"
	pprof "github.com/google/pprof/profile"

	"github.com/cacheheat/cacheheat/profile"
)

// TestShortLivedNamed records programs that run 20 ms and exit, static and
// dynamic (PIE), under -- CMD, -p of their parent and -a, and requires
// their samples to be named: the recorder follows the mappings the kernel
// reports as they are made, so a process that is gone when its window
// closes is still symbolized. A caller frame is never a wrong one: a
// stack is cut where a frame cannot be a return address.
func TestShortLivedNamed(t *testing.T) {
	cc, bin := crunchPrereqs(t, "records short-lived programs for ~20 s")
	dir := t.TempDir()
	src := filepath.Join("testdata", "programs", "crunch.c")
	progs := map[string][]string{"crunch-dyn": {"-O2", "-g"}, "crunch-static": {"-O2", "-g", "-static"}}
	for name, flags := range progs {
		out, err := exec.Command(cc, append(flags, "-o", filepath.Join(dir, name), src)...).CombinedOutput()
		if err != nil {
			if name == "crunch-static" {
				t.Logf("no static build here (%v): %s", err, out)
				delete(progs, name)
				continue
			}
			t.Fatalf("building %s: %v\n%s", name, err, out)
		}
	}
	for name := range progs {
		loop := fmt.Sprintf("for i in $(seq 40); do %s 20 >/dev/null; done", filepath.Join(dir, name))
		for _, mode := range []string{"command", "pid", "all"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				rec := filepath.Join(dir, name+"-"+mode+".rec")
				switch mode {
				case "command":
					if out, err := exec.Command(bin, "record", "-q", "-o", rec, "--", "sh", "-c", loop).CombinedOutput(); err != nil {
						t.Fatalf("record: %v\n%s", err, out)
					}
				default:
					// The loop is the test's own: -p follows it and its
					// children; under -a only its children count.
					sh := exec.Command("sh", "-c", "sleep 0.5; "+loop)
					if err := sh.Start(); err != nil {
						t.Fatal(err)
					}
					args := []string{"record", "-q", "-o", rec}
					if mode == "pid" {
						args = append(args, "-p", strconv.Itoa(sh.Process.Pid))
					} else {
						args = append(args, "-a", "-d", "3s")
					}
					out, err := exec.Command(bin, args...).CombinedOutput()
					sh.Wait()
					if err != nil {
						t.Fatalf("record: %v\n%s", err, out)
					}
				}
				r, err := profile.ReadFile(rec)
				if err != nil {
					t.Fatal(err)
				}
				named, total, cut, nosym := namedShare(t, r, name)
				t.Logf("%s %s: %d of %d samples named, %d in code no symbol covers, %d stacks cut", name, mode, named, total, nosym, cut)
				// Only samples whose code has a name to give are judged.
				total -= nosym
				if total < 20 {
					t.Skipf("only %d samples of %s in named code: the host gave it too little CPU to judge", total, name)
				}
				if float64(named) < 0.95*float64(total) {
					t.Errorf("%s under %s: %d of %d samples named (%.0f%%), want at least 95%%", name, mode, named, total, 100*float64(named)/float64(total))
				}
			})
		}
	}
}

// TestRunningAtStartNamed records -a while a program that was started
// before the recorder runs on and exits within the first window: the
// recorder's mapping watcher never sees it start, and its /proc is gone
// when the window's samples are resolved, so its mappings must be read
// when the recording starts, as perf record synthesizes them. Without that
// every one of its samples was [unknown].
func TestRunningAtStartNamed(t *testing.T) {
	cc, bin := crunchPrereqs(t, "records for 10 s")
	dir := t.TempDir()
	prog := filepath.Join(dir, "crunch-early")
	if out, err := exec.Command(cc, "-O2", "-g", "-o", prog, filepath.Join("testdata", "programs", "crunch.c")).CombinedOutput(); err != nil {
		t.Fatalf("building crunch: %v\n%s", err, out)
	}
	// 4 s of work, started first; one window of 10 s, which closes well
	// after it exited.
	early := exec.Command(prog, "4000")
	if err := early.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = early.Wait() }()
	rec := filepath.Join(dir, "early.rec")
	if out, err := exec.Command(bin, "record", "-q", "-a", "-i", "10s", "-d", "10s", "-o", rec).CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	r, err := profile.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	named, total, cut, nosym := namedShare(t, r, "crunch-early")
	t.Logf("crunch-early: %d of %d samples named, %d in code no symbol covers, %d stacks cut", named, total, nosym, cut)
	total -= nosym
	if total < 10 {
		t.Skipf("only %d samples of crunch-early: the recorder attached after it had nearly finished (a busy host)", total)
	}
	if float64(named) < 0.95*float64(total) {
		t.Errorf("crunch-early: %d of %d samples named, want at least 95%%", named, total)
	}
}

// crunchPrereqs skips a test that records crunch.c's programs where it
// cannot (not root, -short, no C compiler), saying what it does (long);
// else it returns the C compiler and the cacheheat binary.
func crunchPrereqs(t *testing.T, long string) (cc, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	if testing.Short() {
		t.Skip(long + "; skipped with -short")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			t.Skip("needs a C compiler (cc or gcc) to build crunch.c's programs")
		}
	}
	return cc, cacheheatBinary(t)
}

// namedShare counts the samples of processes named comm, those whose
// innermost user frame names a function, and the stacks cut for a frame
// that was no return address. nosym counts the unnamed samples whose
// innermost frame is in a known file at an offset no function symbol of
// that file covers (hasSymbolAt): the dynamic loader's relocation, in a
// loader stripped of .symtab, has no name for any profiler to give (perf
// shows an address there too), and under load, while a 20-ms program
// gets less of the CPU, that fixed start-up work is a larger share of its
// samples. It fails on a caller frame in no mapping.
func namedShare(t *testing.T, r *profile.Recording, comm string) (named, total, cut, nosym uint64) {
	t.Helper()
	checked := false
	logged := 0 // unnamed samples shown, at most 3
	comms := map[int]string{}
	for _, w := range r.Windows {
		for _, p := range w.Processes {
			comms[p.PID] = p.Comm
		}
	}
	for _, w := range r.Windows {
		for _, s := range w.Samples {
			if s.Event != "cpu-clock" || comms[s.PID] != comm || s.UserStack == 0 {
				continue
			}
			total += s.Count
			fs := r.Stacks[s.UserStack].Frames
			switch {
			case len(fs) > 0 && fs[0].Function != "" && !strings.HasPrefix(fs[0].Function, "["):
				named += s.Count
				// The check that excludes samples must hold where the
				// symbolizer found a name: once, on the first such frame
				// in a file.
				if !checked && filepath.IsAbs(fs[0].Module) {
					checked = true
					if has, err := hasSymbolAt(fs[0].Module, fs[0].Offset); err != nil || !has {
						t.Errorf("%s named %s+%#x, but hasSymbolAt found no symbol there (%v)", fs[0].Function, fs[0].Module, fs[0].Offset, err)
					}
				}
			case len(fs) > 0 && (filepath.IsAbs(fs[0].Module) || fs[0].Module == symbolize.ModuleVDSO):
				has, err := hasSymbolAt(fs[0].Module, fs[0].Offset)
				if err != nil {
					t.Logf("%v: judged as unnamed", err)
				} else if !has {
					nosym += s.Count
				} else if logged++; logged <= 3 {
					t.Logf("unnamed where a symbol covers it: %v", fs)
				}
			default:
				if logged++; logged <= 3 {
					t.Logf("unnamed: %v", fs)
				}
			}
			for _, f := range fs {
				if symbolize.IsMarker(f) && f.Function == symbolize.CutNoFramePointer {
					cut++
				}
			}
		}
	}
	return named, total, cut, nosym
}

// hasSymbolAt says whether object module (a file's path, or the vDSO:
// this process's own, as the kernel maps one image into every process)
// has a function symbol covering file offset off, read with debug/elf
// from its symbol tables, not by the symbolizer under test.
func hasSymbolAt(module string, off uint64) (bool, error) {
	var f *elf.File
	var err error
	if module == symbolize.ModuleVDSO {
		var img []byte
		if img, err = ownVDSO(); err != nil {
			return false, err
		}
		f, err = elf.NewFile(bytes.NewReader(img))
	} else {
		f, err = elf.Open(module)
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", module, err)
	}
	defer f.Close()
	var addr uint64
	found := false
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && off >= p.Off && off < p.Off+p.Filesz {
			addr, found = off-p.Off+p.Vaddr, true
			break
		}
	}
	if !found {
		return false, fmt.Errorf("%s: offset %#x in no loaded segment", module, off)
	}
	syms, _ := f.Symbols() // none: a stripped file
	dyn, _ := f.DynamicSymbols()
	for _, s := range append(syms, dyn...) {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && addr >= s.Value && addr < s.Value+s.Size {
			return true, nil
		}
	}
	return false, nil
}

// ownVDSO reads this process's vDSO image from its memory.
func ownVDSO() ([]byte, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if !strings.HasSuffix(line, " [vdso]") {
			continue
		}
		var start, end uint64
		if _, err := fmt.Sscanf(line, "%x-%x", &start, &end); err != nil {
			return nil, fmt.Errorf("/proc/self/maps: %q: %w", line, err)
		}
		mem, err := os.Open("/proc/self/mem")
		if err != nil {
			return nil, err
		}
		defer mem.Close()
		img := make([]byte, end-start)
		if _, err := mem.ReadAt(img, int64(start)); err != nil {
			return nil, fmt.Errorf("reading the vDSO: %w", err)
		}
		return img, nil
	}
	return nil, errors.New("no [vdso] in /proc/self/maps")
}

// TestLinesEndToEnd: a recording of rcu bad keeps its source lines:
// resolved when the recording ends, they are in the report's hot lines
// (rcu.go's lines with their text) after the binary is deleted; recorded
// with --no-lines, the report reads them from the binary, and with the
// binary gone says so instead. The pprof profile carries lines and
// inlined frames (go tool pprof -lines, -list), and folded --lines
// writes func (file:line) frames.
func TestLinesEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	bin := cacheheatBinary(t)
	dir := t.TempDir()
	// The program recorded is a copy, deleted after each recording.
	prog := filepath.Join(dir, "rcu-prog")
	copyProg := func() {
		t.Helper()
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(prog, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	record := func(rec string, flags ...string) {
		t.Helper()
		args := append([]string{"record", "-q", "-o", rec}, flags...)
		args = append(args, "--", prog, "workload", "run", "rcu", "--variant", "bad", "-t", "2", "-d", "2s")
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("record: %v\n%s", err, out)
		}
	}
	report := func(rec string) string {
		t.Helper()
		html := strings.TrimSuffix(rec, ".rec") + ".html"
		if out, err := exec.Command(bin, "report", rec, "-o", html).CombinedOutput(); err != nil {
			t.Fatalf("report: %v\n%s", err, out)
		}
		page, _ := os.ReadFile(html)
		return string(page)
	}
	// The report's rcu.go lines, each with its text as the page shows
	// it: the page has them when it shows some and each one's text is
	// that line of workloads/rcu.go. Which lines are hot depends on where
	// the samples fell (under load, 140 samples of rcu bad missed its
	// copy line), so no one line is asked for.
	src, err := os.ReadFile(filepath.Join("..", "..", "workloads", "rcu.go"))
	if err != nil {
		t.Fatal(err)
	}
	srcLines := strings.Split(string(src), "\n")
	shown := regexp.MustCompile(`>rcu\.go:(\d+)</td><td class="src"><code>([^<]*)</code>`)
	hasLines := func(page string) bool {
		if !strings.Contains(page, `id="hotlines"`) {
			return false
		}
		found := shown.FindAllStringSubmatch(page, -1)
		for _, m := range found {
			n, _ := strconv.Atoi(m[1])
			if n < 1 || n > len(srcLines) || html.UnescapeString(m[2]) != srcLines[n-1] {
				t.Errorf("the report shows rcu.go:%s as %q, the file has %q", m[1], html.UnescapeString(m[2]), srcLines[min(max(n-1, 0), len(srcLines)-1)])
				return false
			}
		}
		return len(found) > 0
	}

	copyProg()
	noLines := filepath.Join(dir, "rcu-nolines.rec")
	record(noLines, "--no-lines")
	if page := report(noLines); !hasLines(page) {
		t.Errorf("recorded with --no-lines, binary in place: the report's hot lines lack rcu.go's lines and their text")
	}
	rec := filepath.Join(dir, "rcu.rec")
	record(rec)
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	if page := report(rec); !hasLines(page) {
		t.Errorf("binary deleted after the recording: the report's hot lines lack rcu.go's lines and their text (they were resolved when the recording ended)")
	}
	if page := report(noLines); hasLines(page) || !strings.Contains(page, "no such file") {
		t.Errorf("recorded with --no-lines, binary deleted: want no rcu.go lines and a note that the file is missing")
	}
	pb := filepath.Join(dir, "rcu.pb.gz")
	if out, err := exec.Command(bin, "export", rec, "--pprof", "-o", pb).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	f, err := os.Open(pb)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := pprof.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var lines, inlined int
	for _, l := range p.Location {
		for _, ln := range l.Line {
			if ln.Line > 0 && strings.HasSuffix(ln.Function.Filename, "rcu.go") {
				lines++
			}
		}
		if len(l.Line) > 1 {
			inlined++
		}
	}
	if lines == 0 || inlined == 0 {
		t.Errorf("pprof profile: %d locations with rcu.go lines, %d with inlined frames; want both", lines, inlined)
	}
	folded, err := exec.Command(bin, "export", rec, "--folded", "--lines").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(folded), "rcu.go:") {
		t.Errorf("folded --lines has no rcu.go frames:\n%.2000s", folded)
	}
}
