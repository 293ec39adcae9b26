package symbolize

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// inlineProgram has a function inlined into another: the line table and
// DWARF's inlined subroutines must give both, with the call site's line.
const inlineProgram = `#include <stdio.h>
static inline __attribute__((always_inline)) unsigned long mix(unsigned long x)
{
	return x * 6364136223846793005UL + 1442695040888963407UL; // line 4
}

__attribute__((noinline)) unsigned long outer(unsigned long n)
{
	unsigned long x = n;
	for (unsigned long i = 0; i < n; i++)
		x = mix(x); // line 11
	return x;
}

int main(int argc, char **argv)
{
	printf("%lu\n", outer(argc * 1000));
	return 0;
}
`

// fileOffsets lists the file offsets of a function's bytes.
func fileOffsets(t *testing.T, bin, fn string) []uint64 {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != fn || s.Size == 0 {
			continue
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && s.Value >= p.Vaddr && s.Value < p.Vaddr+p.Filesz {
				var out []uint64
				for a := s.Value; a < s.Value+s.Size; a++ {
					out = append(out, a-p.Vaddr+p.Off)
				}
				return out
			}
		}
	}
	t.Fatalf("%s has no symbol %s", bin, fn)
	return nil
}

// TestLinesInline: an address in mix, inlined into outer, resolves to
// mix at line 4, inlined into outer at line 11; a build id that does not
// match says the binary changed; a file without debug information says so.
func TestLinesInline(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build a C test binary: not in PATH")
	}
	bin := build(t, "inline-g", inlineProgram, "c", nil, cc, "-O2", "-g")
	l := NewLines()
	var found bool
	for _, off := range fileOffsets(t, bin, "outer") {
		lines, err := l.Resolve(profile.Frame{Function: "outer", Module: bin, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) == 2 && lines[0].Function == "mix" && lines[0].Line == 4 && lines[0].Inlined &&
			lines[1].Function == "outer" && lines[1].Line == 11 && !lines[1].Inlined && strings.HasSuffix(lines[0].File, "main.c") {
			found = true
			break
		}
	}
	if !found {
		off := fileOffsets(t, bin, "outer")[8]
		lines, _ := l.Resolve(profile.Frame{Module: bin, Offset: off})
		t.Errorf("no address of outer resolves to mix:4 inlined into outer:11 (offset %#x gives %+v)", off, lines)
	}

	if _, err := l.Resolve(profile.Frame{Module: bin, Offset: 0x1000, BuildID: "00112233"}); !errors.Is(err, ErrBinaryChanged) {
		t.Errorf("another build id: %v, want ErrBinaryChanged", err)
	}
	stripped := build(t, "inline-s", inlineProgram, "c", nil, cc, "-O2", "-s")
	if _, err := l.Resolve(profile.Frame{Module: stripped, Offset: 0x1000}); !errors.Is(err, ErrNoDebugInfo) {
		t.Errorf("stripped binary: %v, want ErrNoDebugInfo", err)
	}
}

// TestLinesGo: a Go binary's DWARF gives the function and its line; with
// DWARF stripped (-w) the .gopclntab still does.
func TestLinesGo(t *testing.T) {
	for _, flags := range [][]string{nil, {"-ldflags=-w"}} {
		name := "go-lines" + strings.Join(flags, "")
		bin := goBinary(t, strings.NewReplacer("=", "", "-", "").Replace(name), flags...)
		l := NewLines()
		offs := fileOffsets(t, bin, "main.hotLoop")
		lines, err := l.Resolve(profile.Frame{Module: bin, Offset: offs[len(offs)/2]})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(lines) == 0 || lines[len(lines)-1].Function != "main.hotLoop" || lines[len(lines)-1].Line == 0 || !strings.HasSuffix(lines[len(lines)-1].File, "main.go") {
			t.Errorf("%s: %+v, want main.hotLoop in main.go", name, lines)
		}
	}
}

// TestLinesHostile: what a recording names cannot make the reader open
// a device, hang or panic: a missing file, a FIFO, a device, a truncated
// ELF, garbage debug sections.
func TestLinesHostile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	trunc := filepath.Join(dir, "trunc")
	cc, err := exec.LookPath("gcc")
	if err == nil {
		full := build(t, "inline-g", inlineProgram, "c", nil, cc, "-O2", "-g")
		b, _ := os.ReadFile(full)
		os.WriteFile(trunc, b[:len(b)/3], 0o755)
	}
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("\x7fELF\x02\x01\x01garbage garbage garbage"), 0o755)
	l := NewLines()
	for _, p := range []string{filepath.Join(dir, "missing"), fifo, "/dev/zero", "/dev/null", trunc, garbage} {
		lines, err := l.Resolve(profile.Frame{Module: p, Offset: 0x1000})
		if err == nil || lines != nil {
			t.Errorf("%s: lines %v, error %v; want none and a reason", p, lines, err)
		}
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		if _, err := Source("/", p); !errors.Is(err, ErrNotRegularFile) {
			t.Errorf("Source(%s): %v, want ErrNotRegularFile", p, err)
		}
	}
}

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }
