package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
)

// TestExportFFN records 'workload run ffn -t 2' with the real recorder,
// exports it, and checks that go tool pprof -top lists runFFN among the
// top three functions by self time and that the folded stacks sum to the
// recording's cpu-clock samples.
func TestExportFFN(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "ffn.rec")
	if out, err := exec.Command(bin, "record", "-q", "-e", "cpu-clock", "-o", rec, "--",
		bin, "workload", "run", "ffn", "-t", "2", "-d", "3s").CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	r, err := profile.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.FormatVersion != profile.FormatVersion() {
		t.Errorf("recorder wrote format %s, want %s", r.Header.FormatVersion, profile.FormatVersion())
	}
	pb := filepath.Join(dir, "ffn.pb.gz")
	if out, err := exec.Command(bin, "export", rec, "--pprof", "-o", pb).CombinedOutput(); err != nil {
		t.Fatalf("export --pprof: %v\n%s", err, out)
	}
	// ffnNaive is inlined into runFFN's worker: pprof shows it as its
	// own (inline) function, and folds it into runFFN with -noinlines.
	for _, c := range []struct{ flag, want string }{
		{"-top", "workloads.ffnNaive (inline)"},
		{"-noinlines", "workloads.runFFN"},
	} {
		args := []string{"tool", "pprof", "-top"}
		if c.flag != "-top" {
			args = append(args, c.flag)
		}
		out, err := exec.Command("go", append(args, pb)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof %s: %v\n%s", strings.Join(args[2:], " "), err, out)
		}
		// Rows after the "flat flat% sum% cum cum%" header, by flat time.
		_, rows, ok := strings.Cut(string(out), "cum%\n")
		lines := strings.Split(rows, "\n")
		if !ok || len(lines) < 3 {
			t.Fatalf("go tool pprof -top printed no table:\n%s", out)
		}
		if !strings.Contains(strings.Join(lines[:3], "\n"), c.want) {
			t.Errorf("go tool pprof %s: %s is not among the top 3:\n%s", strings.Join(args[2:], " "), c.want, out)
		}
	}

	// Go keeps frame pointers everywhere, so no stack of the workload's
	// Go code is cut, and a worker goroutine's stack ends at
	// runtime.goexit, the return address Go gives every goroutine's first
	// frame. The C library has none: a thread starting in glibc's clone3,
	// or the dynamic loader at start-up, is cut there, rightly (seen
	// beside stress-ng --cpu 2, one sample in a few hundred).
	var workers, cut, rooted uint64
	for _, w := range r.Windows {
		for _, s := range w.Samples {
			if s.Event != "cpu-clock" || s.UserStack == 0 {
				continue
			}
			fs := r.Stacks[s.UserStack].Frames
			var worker, goFrame bool
			for _, f := range fs {
				worker = worker || strings.Contains(f.Function, "runFFN.func1")
				if f.Function == symbolize.CutNoFramePointer {
					if goFrame {
						cut += s.Count
						t.Logf("a Go stack cut: %v", fs)
					}
					break
				}
				goFrame = goFrame || isGoFunction(f.Function)
			}
			if !worker {
				continue
			}
			workers += s.Count
			if strings.HasPrefix(fs[len(fs)-1].Function, "runtime.goexit") {
				rooted += s.Count
			}
		}
	}
	if workers == 0 || cut != 0 || rooted != workers {
		t.Errorf("%d worker samples, %d end at runtime.goexit; %d samples of the workload's Go code cut for no frame pointer (want none)", workers, rooted, cut)
	}

	var folded bytes.Buffer
	cmd := exec.Command(bin, "export", rec, "--folded")
	cmd.Stdout = &folded
	if err := cmd.Run(); err != nil {
		t.Fatalf("export --folded: %v", err)
	}
	var sum, want uint64
	for _, l := range strings.Split(strings.TrimSpace(folded.String()), "\n") {
		n, err := strconv.ParseUint(l[strings.LastIndexByte(l, ' ')+1:], 10, 64)
		if err != nil {
			t.Fatalf("folded line %q: %v", l, err)
		}
		sum += n
	}
	for _, w := range r.Windows {
		for _, s := range w.Samples {
			if s.Event == "cpu-clock" {
				want += s.Count
			}
		}
	}
	if want == 0 || sum != want {
		t.Errorf("folded stacks sum to %d, the recording has %d cpu-clock samples", sum, want)
	}
}

func TestExportUsage(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.rec")
	os.WriteFile(garbage, []byte("not a recording"), 0o644)
	v1 := "../../profile/testdata/v1/ffn-real.rec"
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"neither", []string{"export", v1}, exitUsage, "exactly one of --pprof and --folded"},
		{"both", []string{"export", v1, "--pprof", "--folded"}, exitUsage, "exactly one"},
		{"range", []string{"export", v1, "--folded", "--from", "5s", "--to", "2s"}, exitUsage, "not a time range"},
		{"missing", []string{"export", filepath.Join(dir, "nope.rec"), "--folded"}, exitUsage, "no such file"},
		{"garbage", []string{"export", garbage, "--folded"}, exitFormat, "not a cacheheat recording"},
		{"over itself", []string{"export", v1, "--pprof", "-o", v1}, exitUsage, "would overwrite"},
		{"v1 folded", []string{"export", v1, "--folded", "--pid", "9147"}, exitOK, "o3-ffn;"},
		{"no such event", []string{"export", v1, "--folded", "--event", "bogus"}, exitUsage, `no samples of "bogus"; its sample events: cpu-clock`},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.msg) {
			t.Errorf("%s: exit %d, output %q %q; want exit %d mentioning %q", tc.name, code, out.String(), errb.String(), tc.code, tc.msg)
		}
	}
}

// TestExportFoldedTerminal: export --folded to a terminal shows the
// control bytes of process names and symbols escaped (\x1b), never raw;
// --pprof, binary, is refused there (exit 2). Piped, folded output is
// byte for byte the recording's names. The terminal is a pty of a devpts
// instance mounted for the test.
func TestExportFoldedTerminal(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "hostile.rec")
	writeHostile(t, rec, 1)
	master, slave := openPTY(t, dir)
	bin := cacheheatBinary(t)

	cmd := exec.Command(bin, "export", rec, "--folded")
	cmd.Stdout, cmd.Stderr = slave, io.Discard
	err := cmd.Run()
	slave.Close()
	out, _ := io.ReadAll(master) // EIO once the slave side is closed
	if err != nil || !bytes.Contains(out, []byte(`\x1b]0_pwned`)) || bytes.ContainsAny(out, "\x1b\x07") {
		t.Errorf("export --folded on a terminal: %v, output %q; want the escapes shown as \\x1b, none raw", err, out)
	}
	piped, err := exec.Command(bin, "export", rec, "--folded").Output()
	if err != nil || !bytes.Contains(piped, []byte("\x1b]0_pwned")) {
		t.Errorf("export --folded into a pipe: %v, %q; want the names as recorded", err, piped)
	}

	_, slave2 := openPTY(t, dir)
	cmd = exec.Command(bin, "export", rec, "--pprof", "-o", "-")
	cmd.Stdout = slave2
	if code := exitStatus(cmd.Run()); code != exitUsage {
		t.Errorf("export --pprof -o - on a terminal: exit %d, want %d", code, exitUsage)
	}
}

// openPTY opens a pseudo-terminal pair on a devpts instance of its own,
// mounted under dir (the host's /dev/pts may not be mounted at all).
func openPTY(t *testing.T, dir string) (master, slave *os.File) {
	t.Helper()
	pts := filepath.Join(dir, "pts")
	if _, err := os.Stat(pts); err != nil {
		must(t, os.Mkdir(pts, 0o755))
		if err := syscall.Mount("devpts", pts, "devpts", 0, "newinstance,ptmxmode=0666"); err != nil {
			t.Skipf("cannot mount a devpts instance for a terminal: %v", err)
		}
		t.Cleanup(func() { syscall.Unmount(pts, syscall.MNT_DETACH) })
	}
	m, err := os.OpenFile(filepath.Join(pts, "ptmx"), os.O_RDWR|syscall.O_NOCTTY, 0)
	must(t, err)
	t.Cleanup(func() { m.Close() })
	must(t, unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	must(t, err)
	s, err := os.OpenFile(filepath.Join(pts, strconv.Itoa(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return m, s
}

// isGoFunction says whether a symbol is a Go function's: Go's are
// package-qualified (runtime.goexit, main.main); C's are not, though a
// versioned one has dots after its '@' (fopen@@GLIBC_2.2.5) and a GCC
// or LLVM clone of one has dotted suffixes (ptmalloc_init.part.0, seen
// in a sample of glibc's start-up beside stress-ng; .isra.0,
// .constprop.0, .cold, .llvm.123).
func isGoFunction(sym string) bool {
	name, _, _ := strings.Cut(sym, "@")
	return strings.Contains(name, ".") && !cClone.MatchString(name)
}

// cClone matches a C identifier followed by compiler clone suffixes only.
var cClone = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.(part|isra|constprop|lto_priv|llvm)\.[0-9]+|\.cold(\.[0-9]+)?)+$`)
