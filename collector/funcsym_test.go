package collector

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

func TestParseFuncSpec(t *testing.T) {
	for _, c := range []struct {
		in         string
		path, sym  string
		shouldFail bool
	}{
		{in: "work", sym: "work"},
		{in: "main.handle", sym: "main.handle"},
		{in: "github.com/x/y.(*T).Serve", sym: "github.com/x/y.(*T).Serve"},
		{in: "./srv:main.handle", path: "./srv", sym: "main.handle"},
		{in: "/usr/lib/libz.so.1:deflate", path: "/usr/lib/libz.so.1", sym: "deflate"},
		{in: "/usr/bin/x:", shouldFail: true},
		{in: "", shouldFail: true},
	} {
		got, err := ParseFuncSpec(c.in)
		if (err != nil) != c.shouldFail {
			t.Errorf("ParseFuncSpec(%q): error %v, want failure %v", c.in, err, c.shouldFail)
			continue
		}
		if err == nil && (got.Path != c.path || got.Symbol != c.sym) {
			t.Errorf("ParseFuncSpec(%q) = %+v, want path %q symbol %q", c.in, got, c.path, c.sym)
		}
	}
}

func TestGoRegABI(t *testing.T) {
	for v, want := range map[string]bool{"go1.16.15": false, "go1.17": true, "go1.26.0": true, "go1.21rc2": true, "devel": false, "go2.0": true} {
		if got := goRegABI(v); got != want {
			t.Errorf("goRegABI(%q) = %v, want %v", v, got, want)
		}
	}
}

// goProgram is a Go program whose functions have stack checks (they call
// others, so they are not leaves) and several returns.
const goProgram = `package main

//go:noinline
func leaf(i int) int { return i * 3 }

//go:noinline
func work(i int) int {
	var pad [100]int
	if i < 0 {
		return 0
	}
	pad[i%100] = leaf(i)
	return pad[i%100] + leaf(i+1)
}

// big's frame is over 4 KiB: its stack check has another form.
//
//go:noinline
func big(i int) int {
	var pad [1024]int
	for j := range pad {
		pad[j] = leaf(j + i)
	}
	return pad[i%1024]
}

func main() { println(work(7), big(3)) }
`

// TestGoProbeOffsets disassembles a freshly built Go program's functions:
// every RET is found, and the entry probe goes right past the stack
// check's JBE.
func TestGoProbeOffsets(t *testing.T) {
	dir := t.TempDir()
	src, exe := filepath.Join(dir, "p.go"), filepath.Join(dir, "p")
	if err := os.WriteFile(src, []byte(goProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", exe, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOARCH=amd64", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test program: %v\n%s", err, out)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"main.work", "main.big"} {
		sym, err := findFuncSymbol(f, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		code, err := symbolCode(f, sym)
		if err != nil {
			t.Fatal(err)
		}
		entry, rets, err := goProbeOffsets(code)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Check against an independent walk: each RET offset decodes to
		// RET, and the instruction before the entry is a JBE preceded by
		// a stackguard comparison.
		var insts []x86asm.Inst
		var offs []uint64
		for off := 0; off < len(code); {
			in, err := x86asm.Decode(code[off:], 64)
			if err != nil {
				t.Fatal(err)
			}
			insts, offs = append(insts, in), append(offs, uint64(off))
			off += in.Len
		}
		nret := 0
		for i, in := range insts {
			if in.Op == x86asm.RET {
				if nret >= len(rets) || rets[nret] != offs[i] {
					t.Errorf("%s: RET at +%#x not in %#x", name, offs[i], rets)
				}
				nret++
			}
		}
		if nret != len(rets) || nret == 0 {
			t.Errorf("%s: %d RETs, scan found %d", name, nret, len(rets))
		}
		if entry == 0 {
			t.Errorf("%s: entry probe at 0; the function has a stack check", name)
			continue
		}
		for i := range insts {
			if offs[i]+uint64(insts[i].Len) == entry {
				if insts[i].Op != x86asm.JBE || i == 0 || !isStackGuardCmp(insts[i-1]) {
					t.Errorf("%s: entry +%#x follows %v, %v; want a stackguard CMP and JBE", name, entry, insts[max(i-1, 0)], insts[i])
				}
			}
		}
	}
}
