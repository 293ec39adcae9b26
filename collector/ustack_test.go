package collector

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// deepSrc recurses 40 deep (41 frames of rec) into a leaf that alternates
// a busy loop with system calls, so that samples land in user code (the
// walk starts from the sample's registers) and in the kernel (from the
// registers saved at the call's entry). The statement after each call
// keeps the recursion from becoming a loop, and leaf's loop has an end
// (never reached) so that leaf's call is not the last instruction of rec
// (a call to a function that never returns may be).
const deepSrc = `#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void leaf(void)
{
	while (sink < 1UL << 62) {
		for (int i = 0; i < 20000; i++)
			sink++;
		for (int i = 0; i < 50; i++)
			getppid();
	}
}
__attribute__((noinline)) void rec(int n)
{
	if (n > 0)
		rec(n - 1);
	else
		leaf();
	sink++;
}
int main(void) { rec(40); return 0; }
`

// TestUserStackWalk: the samplers' own walk of a user stack by its frame
// pointers (walk_step, bpf/cacheheat.c) gives what the kernel's walk
// (bpf_get_stack) gives, on one process recorded with each in turn. Ground
// truth is the program's call chain, read from its symbols: leaf's return
// into rec, 40 more into rec, then main; samples in the kernel (its
// system calls) must carry the same chain below the call.
func TestUserStackWalk(t *testing.T) {
	needBPF(t)
	prog := buildC(t, "deep", deepSrc, "-O1", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls", "-no-pie")
	in := symbolRanges(t, prog, "leaf", "rec", "main")
	cmd := exec.Command(prog)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Ground truth: ip, then the return addresses into rec (41 of them:
	// leaf's and those of rec 0..39), then main's.
	want := func(u []uint64) bool {
		if len(u) < 43 {
			return false
		}
		for _, a := range u[1:42] {
			if !in["rec"](a) {
				return false
			}
		}
		return in["main"](u[42])
	}
	chains := map[bool]map[string]uint64{}
	for _, kernelWalk := range []bool{false, true} {
		kernelUserStacks = kernelWalk
		k := pidKernel(t, cmd.Process.Pid, 997, 0)
		kernelUserStacks = false
		time.Sleep(700 * time.Millisecond)
		a, err := k.samples.take()
		if err != nil {
			t.Fatal(err)
		}
		k.close()
		// Chains below the first entry, by where the sample landed.
		got := map[string]uint64{}
		var user, kern, truth, kernTruth uint64
		for key, n := range a.counts {
			if key.stack < 0 || int(key.pid) != cmd.Process.Pid {
				continue
			}
			p := a.stacks[key.stack]
			u := words(p.frames[p.klen:])
			inKernel := p.klen > 0
			if inKernel {
				kern += n
			} else {
				user += n
			}
			if want(u) {
				truth += n
				if inKernel {
					kernTruth += n
				}
				// The first entry is the interrupted instruction: in
				// user code, leaf's or the C library's (its system
				// call's wrapper, which sets up no frame: leaf's return
				// is then the next entry all the same).
				if !inKernel && !in["leaf"](u[0]) && in["text"](u[0]) {
					t.Errorf("kernel walk %v: a user-mode sample's first entry %#x is in the program but not in leaf", kernelWalk, u[0])
				}
			}
			got[fmt.Sprintf("kernel=%v %x", inKernel, u[1:])] += n
		}
		t.Logf("kernel walk %v: %d samples in user code, %d in the kernel; %d with the program's chain (%d in the kernel); %d distinct chains",
			kernelWalk, user, kern, truth, kernTruth, len(got))
		if user < 100 || kern < 20 {
			t.Fatalf("kernel walk %v: %d samples in user code and %d in the kernel in 0.7 s at 997 Hz: too few to judge", kernelWalk, user, kern)
		}
		// A sample in leaf's first instructions, before its frame is
		// set up, misses one frame: a few.
		if truth*100 < (user+kern)*95 || kernTruth*100 < kern*95 {
			t.Errorf("kernel walk %v: %d of %d samples (%d of %d in the kernel) carry the program's chain", kernelWalk, truth, user+kern, kernTruth, kern)
		}
		chains[kernelWalk] = got
	}
	// The same process, so the same addresses: the chains most samples
	// carry are the same for both walks.
	top := func(m map[string]uint64) []string {
		var ks []string
		for c, n := range m {
			if n >= 10 {
				ks = append(ks, c)
			}
		}
		slices.Sort(ks)
		return ks
	}
	if own, kern := top(chains[false]), top(chains[true]); !slices.Equal(own, kern) {
		t.Errorf("chains of 10 samples or more differ between the walks:\nown:    %s\nkernel: %s", strings.Join(own, "\n        "), strings.Join(kern, "\n        "))
	}
}

// words reads a stack's bytes as the addresses they hold.
func words(b string) []uint64 {
	u := make([]uint64, len(b)/8)
	for i := range u {
		u[i] = binary.LittleEndian.Uint64([]byte(b[8*i:]))
	}
	return u
}

// symbolRanges returns, for each function named and for "text" (the
// program's code), whether an address lies in it, from the symbol table of
// the (not position-independent) program.
func symbolRanges(t *testing.T, prog string, names ...string) map[string]func(uint64) bool {
	t.Helper()
	f, err := elf.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]func(uint64) bool{}
	for _, s := range syms {
		if slices.Contains(names, s.Name) && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			lo, hi := s.Value, s.Value+s.Size
			in[s.Name] = func(a uint64) bool { return a >= lo && a < hi }
		}
	}
	if text := f.Section(".text"); text != nil {
		lo, hi := text.Addr, text.Addr+text.Size
		in["text"] = func(a uint64) bool { return a >= lo && a < hi }
	}
	for _, n := range append(names, "text") {
		if in[n] == nil {
			t.Fatalf("%s: no symbol %s", prog, n)
		}
	}
	return in
}
