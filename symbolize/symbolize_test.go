package symbolize

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

const goProgram = `package main

import (
	"fmt"
	"os"
	"reflect"
)

//go:noinline
func hotLoop(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i
	}
	return s
}

func main() {
	fmt.Printf("%#x\n", reflect.ValueOf(hotLoop).Pointer())
	// Wait until the test closes stdin or kills us.
	os.Stdin.Read(make([]byte, 1))
	fmt.Println(hotLoop(3))
}
`

const cProgram = `#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) int hot_loop(int n) {
	int s = 0;
	for (int i = 0; i < n; i++)
		s += i * i;
	return s;
}

int main(void) {
	char c;
	printf("%p %p\n", (void *)hot_loop, (void *)getpid);
	fflush(stdout);
	if (read(0, &c, 1) < 0)
		return 2;
	return hot_loop(3) & 1;
}
`

// buildOnce caches test binaries across tests of one run.
var (
	buildMu  sync.Mutex
	built    = map[string]string{}
	buildDir string
)

// build compiles src with the given command (which gets the source and
// output paths appended) once per name and returns the binary's path.
func build(t *testing.T, name, src, ext string, env []string, argv ...string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[name]; ok {
		return p
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "symbolize-test-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = d
	}
	dir := filepath.Join(buildDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srcPath := filepath.Join(dir, "main."+ext)
	if err := os.WriteFile(srcPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	args := append(append([]string{}, argv[1:]...), "-o", out, srcPath)
	cmd := exec.Command(argv[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, b)
	}
	built[name] = out
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func goBinary(t *testing.T, name string, flags ...string) string {
	t.Helper()
	return goBinaryEnv(t, name, []string{"CGO_ENABLED=0"}, flags...)
}

func goBinaryEnv(t *testing.T, name string, env []string, flags ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool to build a test binary: not in PATH")
	}
	env = append([]string{"GO111MODULE=off"}, env...)
	return build(t, name, goProgram, "go", env, append([]string{goTool, "build"}, flags...)...)
}

func cBinary(t *testing.T, name string, flags ...string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build a C test binary: not in PATH")
	}
	return build(t, name, cProgram, "c", nil, append([]string{cc, "-O1"}, flags...)...)
}

// running is a started test program and the addresses it printed.
type running struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addrs []uint64
}

// start runs bin and reads the hex addresses it prints on its first line.
func start(t *testing.T, bin string) *running {
	t.Helper()
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &running{cmd: cmd, stdin: stdin}
	t.Cleanup(r.kill)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading %s's addresses: %v", bin, err)
	}
	for _, f := range strings.Fields(line) {
		a, err := strconv.ParseUint(strings.TrimPrefix(f, "0x"), 16, 64)
		if err != nil {
			t.Fatalf("parsing address %q: %v", f, err)
		}
		r.addrs = append(r.addrs, a)
	}
	return r
}

// kill ends the program and waits for it, so its pid is really gone.
func (r *running) kill() {
	if r.cmd.ProcessState != nil {
		return
	}
	r.stdin.Close()
	r.cmd.Process.Kill()
	r.cmd.Wait()
}

func (r *running) pid() int { return r.cmd.Process.Pid }

// checkResolves asserts that addr (and an address inside the function)
// resolve to want in pid's mapping of bin, and returns the frame.
func checkResolves(t *testing.T, s *Symbolizer, pid int, addr uint64, want, module string) {
	t.Helper()
	frames := s.User(pid, []uint64{addr, addr + 1})
	if len(frames) != 2 {
		t.Fatalf("User returned %d frames for 2 addresses", len(frames))
	}
	for i, f := range frames {
		if !strings.Contains(f.Function, want) {
			t.Errorf("address %#x: function %q (%s), want %q", addr+uint64(i), f.Function, f, want)
		}
		if module != "" && f.Module != module {
			t.Errorf("address %#x: module %q, want %q", addr+uint64(i), f.Module, module)
		}
	}
}

// goVariants are the kinds of Go binary the symbolizer meets.
var goVariants = []struct {
	name   string
	flags  []string
	linker bool // needs gcc as the external linker
}{
	{"go-exe", nil, false},
	{"go-stripped", []string{"-ldflags=-s -w"}, false},
	{"go-pie-stripped", []string{"-buildmode=pie", "-ldflags=-s -w"}, false},
	// External linking puts C start-up code at the start of .text, so
	// runtime.text must come from the binary's own data.
	{"go-extpie-stripped", []string{"-buildmode=pie", "-ldflags=-linkmode=external -s -w"}, true},
	{"go-ext-stripped", []string{"-ldflags=-linkmode=external -s -w"}, true},
}

// goVariant builds one of goVariants.
func goVariant(t *testing.T, i int) string {
	t.Helper()
	v := goVariants[i]
	env := []string{"CGO_ENABLED=0"}
	if v.linker {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Skip("needs gcc as the external linker: not in PATH")
		}
		env = []string{"CGO_ENABLED=1"}
	}
	return goBinaryEnv(t, v.name, env, v.flags...)
}

func TestGoBinary(t *testing.T) {
	for i, v := range goVariants {
		t.Run(v.name, func(t *testing.T) {
			bin := goVariant(t, i)
			p := start(t, bin)
			s := New()
			if err := s.Snapshot(p.pid()); err != nil {
				t.Fatalf("Snapshot: %v", err)
			}
			checkResolves(t, s, p.pid(), p.addrs[0], "main.hotLoop", bin)

			// The process is gone: its snapshot still resolves.
			p.kill()
			if err := s.Snapshot(p.pid()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Snapshot of an exited process: %v, want os.ErrNotExist", err)
			}
			checkResolves(t, s, p.pid(), p.addrs[0], "main.hotLoop", bin)
		})
	}
}

func TestDeletedBinary(t *testing.T) {
	orig := goBinary(t, "go-exe")
	bin := filepath.Join(t.TempDir(), "deleted-prog")
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	p := start(t, bin)
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	s := New()
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	checkResolves(t, s, p.pid(), p.addrs[0], "main.hotLoop", bin+" (deleted)")
}

// TestDeferredIndexAfterExit snapshots a process, then deletes its binary
// and ends it before any of its addresses is resolved: the file kept open
// for deferred indexing still names its functions.
func TestDeferredIndexAfterExit(t *testing.T) {
	orig := goBinary(t, "go-exe")
	bin := filepath.Join(t.TempDir(), "gone-prog")
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	p := start(t, bin)
	s := New()
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	p.kill()
	checkResolves(t, s, p.pid(), p.addrs[0], "main.hotLoop", bin)
}

// TestNeedsSnapshot: a process needs a snapshot when it has none, or when
// an address falls outside the mappings it had; not for addresses inside
// them, and an unchanged snapshot keeps its generation.
func TestNeedsSnapshot(t *testing.T) {
	bin := goBinary(t, "go-exe")
	p := start(t, bin)
	s := New()
	if !s.NeedsSnapshot(p.pid(), p.addrs) {
		t.Error("NeedsSnapshot of a process never snapshotted: false, want true")
	}
	if g := s.Generation(p.pid()); g != 0 {
		t.Errorf("Generation before any snapshot: %d, want 0", g)
	}
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatal(err)
	}
	if s.NeedsSnapshot(p.pid(), p.addrs) {
		t.Error("NeedsSnapshot of addresses in the snapshot's mappings: true, want false")
	}
	if !s.NeedsSnapshot(p.pid(), []uint64{p.addrs[0], 0x10}) {
		t.Error("NeedsSnapshot of an address in no mapping: false, want true")
	}
	g := s.Generation(p.pid())
	if g == 0 {
		t.Fatal("Generation after a snapshot: 0")
	}
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatal(err)
	}
	if g2 := s.Generation(p.pid()); g2 != g {
		t.Errorf("Generation after a snapshot of unchanged mappings: %d, want %d", g2, g)
	}
}

func TestCBinary(t *testing.T) {
	variants := []struct {
		name  string
		flags []string
		strip bool
	}{
		{"c-pie", nil, false},
		{"c-nopie", []string{"-no-pie"}, false},
		// Stripped: only .dynsym is left, which -rdynamic fills.
		{"c-stripped-dynsym", []string{"-rdynamic", "-s"}, true},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			bin := cBinary(t, v.name, v.flags...)
			if v.strip {
				if f := sectionNames(t, bin); strings.Contains(f, ".symtab") {
					t.Fatalf("%s still has .symtab: %s", bin, f)
				}
			}
			p := start(t, bin)
			s := New()
			if err := s.Snapshot(p.pid()); err != nil {
				t.Fatalf("Snapshot: %v", err)
			}
			checkResolves(t, s, p.pid(), p.addrs[0], "hot_loop", bin)
			// getpid lives in libc (resolved through its .dynsym or
			// .symtab); the module is whatever libc's path is.
			checkResolves(t, s, p.pid(), p.addrs[1], "getpid", "")
			p.kill()
			checkResolves(t, s, p.pid(), p.addrs[0], "hot_loop", bin)
		})
	}
}

func TestDebugFile(t *testing.T) {
	bin := cBinary(t, "c-build-id", "-Wl,--build-id")
	for _, tool := range []string{"objcopy", "strip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (binutils) to split debug symbols: not in PATH", tool)
		}
	}
	// Move the symbols into DIR/.build-id/xx/rest.debug, as a
	// distribution's -dbgsym package does, and strip the binary.
	dir := t.TempDir()
	stripped := filepath.Join(dir, "prog")
	debug := filepath.Join(dir, "prog.debug")
	for _, argv := range [][]string{
		{"objcopy", "--only-keep-debug", bin, debug},
		{"strip", "--strip-all", "-o", stripped, bin},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	f, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(buildID(f))
	f.Close()
	if id == "" {
		t.Fatalf("%s has no build id", stripped)
	}
	debugDir := filepath.Join(dir, "debug")
	if err := os.MkdirAll(filepath.Join(debugDir, ".build-id", id[:2]), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(debug, filepath.Join(debugDir, ".build-id", id[:2], id[2:]+".debug")); err != nil {
		t.Fatal(err)
	}

	p := start(t, stripped)
	// Without the debug file hot_loop (static, not exported) has no name.
	s := New()
	s.debugDirs = nil
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatal(err)
	}
	if f := s.User(p.pid(), p.addrs[:1])[0]; strings.Contains(f.Function, "hot_loop") {
		t.Fatalf("stripped binary resolved hot_loop without its debug file: %+v", f)
	}
	s = New()
	s.debugDirs = []string{debugDir}
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatal(err)
	}
	checkResolves(t, s, p.pid(), p.addrs[0], "hot_loop", stripped)
}

func TestStats(t *testing.T) {
	bin := goBinary(t, "go-exe")
	p := start(t, bin)
	s := New()
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatal(err)
	}
	// Files are indexed when an address in them is first resolved, not
	// when they are first seen mapped.
	st := s.Stats()
	if st.Processes != 1 || st.Files < 1 || st.Deferred != st.Files || st.Symbols != 0 {
		t.Errorf("Stats after a snapshot of one Go process: %+v, want 1 process, >= 1 file, all deferred, no symbols", st)
	}
	checkResolves(t, s, p.pid(), p.addrs[0], "main.hotLoop", bin)
	st = s.Stats()
	if st.Deferred != st.Files-1 || st.Symbols < 100 {
		t.Errorf("Stats after resolving an address of the binary: %+v, want one file indexed with >= 100 symbols", st)
	}
	if len(st.Problems) != 0 {
		t.Errorf("Stats problems for a plain Go binary: %q", st.Problems)
	}
}

func TestUnknownRegion(t *testing.T) {
	bin := goBinary(t, "go-exe")
	p := start(t, bin)
	s := New()
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	// Page zero is never mapped.
	f := s.User(p.pid(), []uint64{0x10})[0]
	if f.Function != "" || f.String() != "[unknown]+0x10" {
		t.Errorf("address in no mapping: %+v (%s), want [unknown]+0x10", f, f)
	}
	// The first executable page of a Go binary starts with the ELF
	// header, which is in no function: the frame keeps the module and the
	// file offset.
	var m *mapping
	for i := range s.procs[p.pid()].maps {
		if mm := &s.procs[p.pid()].maps[i]; mm.module == bin {
			m = mm
			break
		}
	}
	if m == nil {
		t.Fatalf("no executable mapping of %s in the snapshot", bin)
	}
	f = s.User(p.pid(), []uint64{m.start + 8})[0]
	want := fmt.Sprintf("%s+0x%x", bin, m.pgoff+8)
	if f.Function != "" || f.String() != want {
		t.Errorf("address in the ELF header: %+v (%s), want %s", f, f, want)
	}
	// A pid that never existed has no snapshot at all.
	if err := s.Snapshot(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Snapshot of a missing pid: %v, want os.ErrNotExist", err)
	}
	if f := s.User(1<<30, []uint64{0x1234})[0]; f.String() != "[unknown]+0x1234" {
		t.Errorf("address of a missing pid: %s, want [unknown]+0x1234", f)
	}
}

func TestSharedFiles(t *testing.T) {
	bin := goBinary(t, "go-exe")
	a, b := start(t, bin), start(t, bin)
	s := New()
	for _, p := range []*running{a, b} {
		if err := s.Snapshot(p.pid()); err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
	}
	objOf := func(pid int) *object {
		for _, m := range s.procs[pid].maps {
			if m.module == bin {
				return m.obj
			}
		}
		return nil
	}
	oa, ob := objOf(a.pid()), objOf(b.pid())
	checkResolves(t, s, a.pid(), a.addrs[0], "main.hotLoop", bin)
	if oa == nil || oa != ob {
		t.Errorf("two processes of one binary got tables %p and %p, want one shared", oa, ob)
	}
	if oa != nil && oa.symbols() == 0 {
		t.Errorf("%s indexed with no symbols: %v", bin, oa.err)
	}
	// A second snapshot of unchanged mappings keeps the same process.
	before := s.procs[a.pid()]
	if err := s.Snapshot(a.pid()); err != nil {
		t.Fatal(err)
	}
	if s.procs[a.pid()] != before {
		t.Error("Snapshot of unchanged mappings rebuilt the process")
	}
	s.Forget(a.pid())
	if _, ok := s.procs[a.pid()]; ok {
		t.Error("Forget kept the process")
	}
}

func TestVDSO(t *testing.T) {
	s := New()
	pid := os.Getpid()
	if err := s.Snapshot(pid); err != nil {
		t.Fatal(err)
	}
	for _, m := range s.procs[pid].maps {
		if m.module != ModuleVDSO {
			continue
		}
		if m.obj == nil || m.obj.symbols() == 0 {
			t.Fatalf("vdso not indexed")
		}
		// Every symbol of the vDSO resolves to itself or an alias at its
		// address; look one name up through the table to get an address.
		for _, tab := range m.obj.tables {
			for _, e := range tab.entries {
				if name := tab.name(e); strings.Contains(name, "clock_gettime") {
					f := s.User(pid, []uint64{m.start + e.addr + 1})[0]
					if !strings.Contains(f.Function, "clock_gettime") || f.Module != ModuleVDSO {
						t.Errorf("vdso clock_gettime+1 resolved to %+v", f)
					}
					return
				}
			}
		}
		t.Fatal("no clock_gettime in the vdso")
	}
	t.Skip("needs a vdso: this process has none mapped")
}

func TestPerfMap(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: writes /tmp/perf-PID.map for another process")
	}
	bin := goBinary(t, "go-exe")
	p := start(t, bin)
	s := New()
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatal(err)
	}
	// A Go program has no JIT, so this checks how the map file of a
	// running process is found and parsed, not a real JIT's output.
	path := fmt.Sprintf("/tmp/perf-%d.map", p.pid())
	t.Cleanup(func() { os.Remove(path) })
	if err := os.WriteFile(path, []byte("1000 20 jitted_a\n0x2000 0x10 LazyCompile:*b /x.js:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pr := &process{}
	s.readPerfMap(p.pid(), pr)
	for _, c := range []struct {
		addr uint64
		want string
	}{{0x1000, "jitted_a"}, {0x101f, "jitted_a"}, {0x1020, ""}, {0x2008, "LazyCompile:*b /x.js:1"}} {
		if got, _ := pr.perfMap.lookup(c.addr); got != c.want {
			t.Errorf("perf map lookup %#x: %q, want %q", c.addr, got, c.want)
		}
	}
}

func sectionNames(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command("readelf", "-S", "-W", bin).Output()
	if err != nil {
		t.Skipf("needs readelf to check the strip: %v", err)
	}
	return string(out)
}

//go:noinline
func benchLeaf() []uintptr {
	pcs := make([]uintptr, 64)
	return pcs[:runtime.Callers(0, pcs)]
}

func BenchmarkUser(b *testing.B) {
	s := New()
	pid := os.Getpid()
	if err := s.Snapshot(pid); err != nil {
		b.Fatal(err)
	}
	// A realistic stack: this process's own call chain plus a few
	// functions elsewhere in the binary and one unknown address.
	var addrs []uint64
	for _, pc := range benchLeaf() {
		addrs = append(addrs, uint64(pc))
	}
	for _, f := range []any{fmt.Sprintf, strconv.Itoa, reflect.ValueOf, errors.Is} {
		addrs = append(addrs, uint64(reflect.ValueOf(f).Pointer())+4)
	}
	addrs = append(addrs, 0x10)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.User(pid, addrs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(addrs)), "ns/addr")
}

func BenchmarkSnapshotUnchanged(b *testing.B) {
	s := New()
	pid := os.Getpid()
	if err := s.Snapshot(pid); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := s.Snapshot(pid); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConcurrent runs Snapshot, User, Kernel and Stats at once; run with
// -race it checks the locking.
func TestConcurrent(t *testing.T) {
	s := New()
	pid := os.Getpid()
	addr := uint64(reflect.ValueOf(benchLeaf).Pointer())
	var wg sync.WaitGroup
	errs := make(chan string, 4*50)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				switch (g + i) % 4 {
				case 0:
					if err := s.Snapshot(pid); err != nil {
						errs <- err.Error()
					}
				case 1:
					if f := s.User(pid, []uint64{addr})[0]; !strings.HasSuffix(f.Function, ".benchLeaf") {
						errs <- fmt.Sprintf("benchLeaf resolved to %+v", f)
					}
				case 2:
					s.Kernel([]uint64{0x1000})
				case 3:
					s.Stats()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// BenchmarkIndexGoBinary measures indexing this test binary (a Go binary of
// a few MB), the one-time cost of the first process that maps a file; or
// the file $INDEX_BIN names (bin/cacheheat, 26 MB: BENCHMARKS.md).
func BenchmarkIndexGoBinary(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	if p := os.Getenv("INDEX_BIN"); p != "" {
		exe = p
	}
	f, err := os.Open(exe)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	var n int
	for b.Loop() {
		o, err := loadObject(f)
		if err != nil {
			b.Fatal(err)
		}
		n = o.symbols()
	}
	b.ReportMetric(float64(n), "symbols")
}

// TestMalformedFiles feeds the indexer truncated and corrupted copies of a
// real binary: it must return an error or a table, never panic.
func TestMalformedFiles(t *testing.T) {
	data := selfImage(t)
	inputs := [][]byte{nil, []byte("\x7fELF"), data[:64], data[:4096], data[:len(data)/2]}
	corrupt := append([]byte(nil), data...)
	for i := 64; i < len(corrupt); i += 4093 {
		corrupt[i] ^= 0xff
	}
	inputs = append(inputs, corrupt)
	for i, in := range inputs {
		o, err := loadObject(bytes.NewReader(in))
		if err == nil && o == nil {
			t.Errorf("input %d: no table and no error", i)
		}
	}
	if _, err := parseMaps([]byte("garbage\n00400000-00300000 r-xp 0 0:0 0 /x\n")); err == nil {
		t.Error("parseMaps accepted an inverted address range")
	}
}

// TestBuildID checks that frames carry their file's build id: the GNU
// build id readelf -n prints, or for a Go binary linked without one, what
// go tool buildid prints.
func TestBuildID(t *testing.T) {
	gnu := func(t *testing.T, bin string) string {
		out, err := exec.Command("readelf", "-n", bin).Output()
		if err != nil {
			t.Skipf("needs readelf (binutils) to read the build id: %v", err)
		}
		_, id, ok := strings.Cut(string(out), "Build ID: ")
		if !ok {
			t.Fatalf("readelf -n shows no build id:\n%s", out)
		}
		return strings.Fields(id)[0]
	}
	for _, v := range []struct {
		name, fn string
		bin      func(t *testing.T) string
		want     func(t *testing.T, bin string) string
	}{
		{"go", "main.hotLoop", func(t *testing.T) string { return goBinary(t, "go-exe") }, gnu},
		{"go-without-gnu-note", "main.hotLoop", func(t *testing.T) string {
			return goBinaryEnv(t, "go-nognu", []string{"CGO_ENABLED=0"}, "-ldflags=-B none")
		}, func(t *testing.T, bin string) string {
			out, err := exec.Command("go", "tool", "buildid", bin).Output()
			if err != nil {
				t.Fatalf("go tool buildid: %v", err)
			}
			return strings.TrimSpace(string(out))
		}},
		{"c", "hot_loop", func(t *testing.T) string { return cBinary(t, "c-pie-buildid", "-Wl,--build-id") }, gnu},
	} {
		t.Run(v.name, func(t *testing.T) {
			bin := v.bin(t)
			want := v.want(t, bin)
			p := start(t, bin)
			s := New()
			if err := s.Snapshot(p.pid()); err != nil {
				t.Fatalf("Snapshot: %v", err)
			}
			f := s.User(p.pid(), []uint64{p.addrs[0]})[0]
			if !strings.Contains(f.Function, v.fn) || f.BuildID != want {
				t.Errorf("frame %+v: build id %q, want %q", f, f.BuildID, want)
			}
		})
	}
}

// TestPLTNames: PLT stubs are named func@plt, as perf and objdump name
// them, not after the symbol below them (_init).
func TestPLTNames(t *testing.T) {
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("needs objdump (binutils) to list the PLT stubs: not in PATH")
	}
	for _, v := range []struct {
		name  string
		flags []string
	}{{"plt-lazy", []string{"-Wl,-z,lazy"}}, {"plt-ibt", []string{"-fcf-protection=full", "-Wl,-z,ibtplt"}}} {
		t.Run(v.name, func(t *testing.T) {
			bin := cBinary(t, v.name, v.flags...)
			out, err := exec.Command(objdump, "-d", "-j", ".plt", "-j", ".plt.sec", bin).Output()
			if err != nil {
				t.Fatalf("objdump: %v", err)
			}
			// Lines like "0000000000001030 <puts@plt>:".
			want := map[uint64]string{}
			for _, line := range strings.Split(string(out), "\n") {
				addr, name, ok := strings.Cut(strings.TrimSuffix(line, ">:"), " <")
				if !ok || !strings.HasSuffix(name, "@plt") || !strings.HasSuffix(line, ">:") {
					continue
				}
				a, err := strconv.ParseUint(addr, 16, 64)
				if err == nil {
					want[a] = name
				}
			}
			if len(want) == 0 {
				t.Fatalf("objdump lists no PLT stubs in %s:\n%s", bin, out)
			}
			f, err := os.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			obj, err := loadObject(f)
			if err != nil {
				t.Fatal(err)
			}
			for addr, name := range want {
				var off uint64
				for _, s := range obj.segs {
					if addr >= s.vaddr && addr-s.vaddr < s.filesz {
						off = addr - s.vaddr + s.off
					}
				}
				// The stub's first and last byte.
				for _, o := range []uint64{off, off + 15} {
					if got, ok := obj.resolve(o); !ok || got != name {
						t.Errorf("offset %#x in the stub at %#x: %q, want %q", o, addr, got, name)
					}
				}
			}
		})
	}
}

// TestSignalFrames: a Go stack through the runtime's signal handling is
// cut where frame pointers end, at the kernel's signal trampoline, and
// says so; a call the runtime injects (asyncPreempt, whose return address
// is the interrupted PC, after no call) is not cut.
func TestSignalFrames(t *testing.T) {
	bin := goBinary(t, "go-exe")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Assembly functions' ELF symbols carry their ABI (".abi0"); the
	// symbolizer names them from the Go line table, without it.
	addr := map[string]uint64{}
	for _, s := range syms {
		addr[strings.TrimSuffix(s.Name, ".abi0")] = s.Value
	}
	for _, name := range []string{"runtime.sigtramp", "runtime.sigreturn__sigaction", "runtime.asyncPreempt", "main.hotLoop", "main.main"} {
		if addr[name] == 0 {
			t.Fatalf("%s: no symbol %s", bin, name)
		}
	}
	p := start(t, bin)
	s := New()
	if err := s.Snapshot(p.pid()); err != nil {
		t.Fatal(err)
	}
	names := func(fs []profile.Frame) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Function)
		}
		return out
	}
	// sigtramp, returning to the trampoline, then what lies beyond.
	got := names(s.UserStack(p.pid(), []uint64{addr["runtime.sigtramp"] + 4, addr["runtime.sigreturn__sigaction"], addr["main.main"] + 8}))
	if want := []string{"runtime.sigtramp", CutSignal}; !slices.Equal(got, want) {
		t.Errorf("through the signal trampoline: %q, want %q", got, want)
	}
	// asyncPreempt "called" at hotLoop's first instruction, which no call
	// precedes: the interrupted function is its true caller.
	got = names(s.UserStack(p.pid(), []uint64{addr["runtime.asyncPreempt"] + 4, addr["main.hotLoop"]}))
	if want := []string{"runtime.asyncPreempt", "main.hotLoop"}; !slices.Equal(got, want) {
		t.Errorf("an injected call: %q, want %q", got, want)
	}
	// The same address under an ordinary function is no return address.
	got = names(s.UserStack(p.pid(), []uint64{addr["main.main"] + 8, addr["main.hotLoop"]}))
	if want := []string{"main.main", CutNoFramePointer}; !slices.Equal(got, want) {
		t.Errorf("a return address after no call: %q, want %q", got, want)
	}
}

// TestFollowExecs: a process that exec'd another file needs a new
// snapshot even where its addresses still fall in the old mappings; not
// when the caller follows execs (FollowExecs), which reports them through
// Exec instead.
func TestFollowExecs(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("needs sh: not in PATH")
	}
	cmd := exec.Command(sh, "-c", "read x; exec sleep 30")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	s := New()
	if err := s.Snapshot(pid); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	addr := s.procs[pid].maps[0].start
	s.mu.Unlock()
	before, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	stdin.Write([]byte("\n"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if now, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); now != before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not exec sleep", sh)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !s.NeedsSnapshot(pid, []uint64{addr}) {
		t.Error("NeedsSnapshot after an exec, at an address of the old mappings: false, want true")
	}
	s.FollowExecs(true)
	if s.NeedsSnapshot(pid, []uint64{addr}) {
		t.Error("NeedsSnapshot with execs followed: true, want false (the exec is reported, not looked for)")
	}
	s.FollowExecs(false)
	if !s.NeedsSnapshot(pid, []uint64{addr}) {
		t.Error("NeedsSnapshot with execs no longer followed: false, want true")
	}
}

// TestGoFuncs118 holds the direct reader of a pclntab to debug/gosym's
// reading of the same table, function by function, in this test binary
// and each kind of Go binary the symbolizer meets; and funcSymbols to
// debug/elf's symbols, in the binaries that have a .symtab.
func TestGoFuncs118(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bins := map[string]func(t *testing.T) string{
		"test binary": func(*testing.T) string { return self },
		"c":           func(t *testing.T) string { return cBinary(t, "c-build-id", "-Wl,--build-id") },
	}
	for i, v := range goVariants {
		bins[v.name] = func(t *testing.T) string { return goVariant(t, i) }
	}
	for name, build := range bins {
		t.Run(name, func(t *testing.T) {
			file, f := openELF(t, build(t))
			// What loadObject reads mapped, against debug/elf's reading.
			big := bigSections{file: file}
			defer big.close()
			all, symErr := f.Symbols()
			got, gotErr := funcSymbols(f, &big)
			if (symErr == nil) != (gotErr == nil) {
				t.Fatalf("funcSymbols: %v; debug/elf: %v", gotErr, symErr)
			}
			var want []elf.Symbol
			var textStart uint64
			for _, s := range all {
				if typ := elf.ST_TYPE(s.Info); typ == elf.STT_FUNC || typ == elf.STT_GNU_IFUNC || s.Name == "runtime.text" {
					want = append(want, s)
				}
				if s.Name == "runtime.text" {
					textStart = s.Value
				}
			}
			if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Errorf("funcSymbols: %d symbols, debug/elf: %d, or they differ", len(got), len(want))
			}
			sect := f.Section(".gopclntab")
			if sect == nil {
				sect = f.Section(".data.rel.ro.gopclntab")
			}
			if sect == nil {
				if name != "c" {
					t.Fatal("no .gopclntab")
				}
				return
			}
			data, err := sect.Data()
			if err != nil {
				t.Fatal(err)
			}
			mapped, err := big.data(sect)
			if err != nil || !bytes.Equal(mapped, data) || len(big.maps) == 0 {
				t.Fatalf("the section mapped: %d bytes (%v), %d mappings; read: %d bytes", len(mapped), err, len(big.maps), len(data))
			}
			if textStart == 0 {
				textStart = goTextStart(f, sect, data)
			}
			tab, lo, hi, ok := goFuncs118(mapped, textStart)
			if !ok {
				t.Fatal("goFuncs118 did not read the table")
			}
			big.close() // the table holds nothing of the mapping
			ref, refLo, refHi := gosymFuncs(data, textStart)
			if lo != refLo || hi != refHi || tab.len() != ref.len() {
				t.Fatalf("goFuncs118: %d functions in [%#x, %#x); debug/gosym: %d in [%#x, %#x)", tab.len(), lo, hi, ref.len(), refLo, refHi)
			}
			for i, e := range tab.entries {
				r := ref.entries[i]
				if e.addr != r.addr || e.size != r.size || tab.name(e) != ref.name(r) {
					t.Fatalf("function %d: %#x+%d %q; debug/gosym: %#x+%d %q", i, e.addr, e.size, tab.name(e), r.addr, r.size, ref.name(r))
				}
			}
		})
	}
}

// TestMappedSectionTruncated: a section mapped from a file that is then
// truncated faults when read; under guarded, as loadObject reads, that is
// an error, not a crash of the recorder.
func TestMappedSectionTruncated(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, selfImage(t), 0o644); err != nil {
		t.Fatal(err)
	}
	file, f := openELF(t, p)
	sect := f.Section(".gopclntab")
	if sect == nil {
		t.Fatal("the test binary has no .gopclntab")
	}
	big := bigSections{file: file}
	defer big.close()
	mapped, err := big.data(sect)
	if err != nil || len(big.maps) != 1 {
		t.Fatalf("mapping .gopclntab: %v, %d mappings", err, len(big.maps))
	}
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	err = guarded(func() error {
		goFuncs118(mapped, 0)
		return nil
	})
	if err == nil {
		t.Fatal("reading the mapping of a truncated file: no error")
	}
	t.Log(err)
}

// selfImage returns the bytes of this test binary, a real Go ELF file.
func selfImage(t *testing.T) []byte {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// openELF opens the file at path and parses it as ELF; the file stays
// open until the test ends.
func openELF(t *testing.T, path string) (*os.File, *elf.File) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	f, err := elf.NewFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, f
}
