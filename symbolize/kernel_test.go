package symbolize

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// kallsymsEntry is one text symbol of the running kernel.
type kallsymsEntry struct {
	addr   uint64
	name   string
	module string
}

// pickKallsyms returns a core-kernel and (if any is loaded) a module text
// symbol, each with every name listed at its address (aliases).
func pickKallsyms(t *testing.T) (core, mod kallsymsEntry, names map[uint64][]string) {
	t.Helper()
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Skipf("needs /proc/kallsyms: %v", err)
	}
	defer f.Close()
	names = map[uint64][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || !strings.ContainsAny(fields[1], "tTwW") {
			continue
		}
		addr, err := strconv.ParseUint(fields[0], 16, 64)
		if err != nil || addr == 0 {
			continue
		}
		names[addr] = append(names[addr], fields[2])
		switch {
		case len(fields) == 3 && fields[2] == "vfs_read":
			core = kallsymsEntry{addr, fields[2], ModuleKernel}
		case len(fields) == 4 && mod.addr == 0 && !strings.HasPrefix(fields[2], "__pfx_") && fields[3] != "[bpf]" && !strings.HasPrefix(fields[3], "[__builtin"):
			mod = kallsymsEntry{addr, fields[2], fields[3]}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return core, mod, names
}

func TestKernel(t *testing.T) {
	s := New()
	if err := s.KernelAvailable(); err != nil {
		if errors.Is(err, ErrKernelHidden) {
			t.Skipf("needs root: %v", err)
		}
		t.Fatalf("KernelAvailable: %v", err)
	}
	core, mod, names := pickKallsyms(t)
	if core.addr == 0 {
		t.Fatal("vfs_read not in /proc/kallsyms")
	}
	entries := []kallsymsEntry{core}
	if mod.addr != 0 {
		entries = append(entries, mod)
	} else {
		t.Log("no kernel module loaded: module symbols not checked")
	}
	for _, e := range entries {
		frames := s.Kernel([]uint64{e.addr, e.addr + 1})
		for i, f := range frames {
			ok := false
			for _, n := range names[e.addr] {
				ok = ok || f.Function == n
			}
			if !ok {
				t.Errorf("%s+%d: resolved to %+v, want one of %q", e.name, i, f, names[e.addr])
			}
			if f.Module != e.module {
				t.Errorf("%s+%d: module %q, want %q", e.name, i, f.Module, e.module)
			}
		}
	}
	// Below every kernel symbol nothing resolves: the raw address stays.
	if f := s.Kernel([]uint64{0x1000})[0]; f.Function != "" || f.String() != "[kernel]+0x1000" {
		t.Errorf("address below the kernel: %+v (%s), want [kernel]+0x1000", f, f)
	}
}

func TestKernelHidden(t *testing.T) {
	s := NewWithRoot("testdata/hidden")
	err := s.KernelAvailable()
	if !errors.Is(err, ErrKernelHidden) {
		t.Fatalf("KernelAvailable with zero addresses: %v, want ErrKernelHidden", err)
	}
	if !strings.Contains(err.Error(), "kptr_restrict=1") {
		t.Errorf("error %q does not name kptr_restrict", err)
	}
	addr := uint64(0xffffffff81234567)
	if f := s.Kernel([]uint64{addr})[0]; f.Function != "" || f.Module != ModuleKernel || f.Offset != addr {
		t.Errorf("hidden kernel frame: %+v, want [kernel]+%#x", f, addr)
	}
}

func BenchmarkKernel(b *testing.B) {
	s := New()
	if err := s.KernelAvailable(); err != nil {
		b.Skipf("needs root: %v", err)
	}
	addrs := []uint64{}
	for _, f := range s.kernel.table.entries[:16] {
		addrs = append(addrs, f.addr+3)
	}
	for b.Loop() {
		s.Kernel(addrs)
	}
}

// TestKallsymsListing checks the parsing of a kallsyms listing with modules
// (the live kernel here may have none loaded).
func TestKallsymsListing(t *testing.T) {
	s := NewWithRoot("testdata/modules")
	if err := s.KernelAvailable(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr   uint64
		want   string // Frame.Function
		module string
		offset uint64
	}{
		{0xffffffff81001010, "vfs_read", ModuleKernel, 0x1010}, // global wins over its local alias
		{0xffffffff81001fff, "vfs_read", ModuleKernel, 0x1fff}, // data symbols do not end a function
		{0xffffffff81001008, "_text", ModuleKernel, 0x1008},    // __pfx_ padding is left out
		{0xffffffffc0100010, "ext4_read_inode", "[ext4]", 0x10},
		{0xffffffffc0100410, "ext4_iget", "[ext4]", 0x410},
		{0xffffffffc0200004, "bpf_prog_1234_probe", "[bpf]", 0x4},
		{0xffffffff80000000, "", ModuleKernel, 0xffffffff80000000},
	} {
		f := s.Kernel([]uint64{c.addr})[0]
		if f.Function != c.want || f.Module != c.module || f.Offset != c.offset {
			t.Errorf("%#x: %+v, want {%s %s %#x}", c.addr, f, c.want, c.module, c.offset)
		}
	}
}
