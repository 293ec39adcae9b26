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

// deepSrc is a C program whose main calls rec(DEPTH) forever, rec
// recursing into leaf, whose includes and body are the first two
// arguments. The statement after each call keeps the recursion from
// becoming a loop.
const deepSrc = `%s
volatile unsigned long sink;
__attribute__((noinline)) void leaf(void)
{
%s
}
__attribute__((noinline)) void rec(int n)
{
	if (n > 0)
		rec(n - 1);
	else
		leaf();
	sink++;
}
int main(void)
{
	for (;;)
		rec(%d);
}
`

// startDeep builds and starts deepSrc with frame pointers, and returns
// the program's path, its functions' address tests and a test of a user
// stack against its call chain: any first entry (where the thread was),
// then the return addresses into rec (depth + 1 of them: leaf's and those
// of rec 0..depth-1), then main's.
func startDeep(t *testing.T, name, includes, leaf string, depth int) (*exec.Cmd, string, map[string]func(uint64) bool, func([]uint64) bool) {
	t.Helper()
	prog := buildC(t, name, fmt.Sprintf(deepSrc, includes, leaf, depth), "-O1", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls", "-no-pie")
	in := symbolRanges(t, prog, "leaf", "rec", "main")
	cmd := exec.Command(prog)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	chain := func(u []uint64) bool {
		if len(u) < depth+3 {
			return false
		}
		for _, a := range u[1 : depth+2] {
			if !in["rec"](a) {
				return false
			}
		}
		return in["main"](u[depth+2])
	}
	return cmd, prog, in, chain
}

// TestUserStackWalk: the samplers' own walk of a user stack by its frame
// pointers (walk_step, bpf/cacheheat.c) gives what the kernel's walk
// (bpf_get_stack) gives, on one process recorded with each in turn, and
// once more with a uretprobe on rec (as --func times a C function), whose
// trampoline stands in for rec's return addresses while a call is in
// flight: the kernel's walk puts them back, and the samplers leave such a
// thread to it. Ground truth is the program's call chain, read from its
// symbols: leaf's return into rec, 40 more into rec, then main; samples
// in the kernel (its system calls) must carry the same chain below the
// call.
func TestUserStackWalk(t *testing.T) {
	needBPF(t)
	// 40 deep into a leaf that runs a busy loop and then system calls, so
	// that samples land in user code (the walk starts from the sample's
	// registers) and in the kernel (from the registers saved at the
	// call's entry), over and over, a few ms a round: a uretprobe on rec
	// attached while it runs has calls to see, and its traps (two per
	// call) are a small part of the time.
	cmd, prog, in, want := startDeep(t, "deep", "#include <unistd.h>", `	for (int i = 0; i < 1000000; i++)
		sink++;
	for (int i = 0; i < 2000; i++)
		getppid();`, 40)
	chains := map[string]map[string]uint64{}
	for _, pass := range []string{"own", "kernel", "uretprobe"} {
		kernelWalk := pass == "kernel"
		if pass == "uretprobe" {
			fk, err := openFuncs(funcConfig{specs: []FuncSpec{{Path: prog, Symbol: "rec"}}, pids: []int{cmd.Process.Pid}})
			if err != nil {
				t.Fatal(err)
			}
			defer fk.close()
		}
		kernelUserStacks = kernelWalk
		k := pidKernel(t, cmd.Process.Pid, 997, 0)
		kernelUserStacks = false
		time.Sleep(1500 * time.Millisecond)
		a, err := k.samples.take()
		if err != nil {
			t.Fatal(err)
		}
		k.close()
		// Chains below the first entry, by where the sample landed.
		got := map[string]uint64{}
		var leafN, leafTruth, kern, kernTruth uint64
		for key, n := range a.counts {
			if key.stack < 0 || int(key.pid) != cmd.Process.Pid {
				continue
			}
			p := a.stacks[key.stack]
			u := words(p.frames[p.klen:])
			inKernel := p.klen > 0
			if len(u) == 0 {
				continue
			}
			// In user code, leaf's samples, which all have the
			// program's whole chain below them; in the kernel, those
			// of its system calls and (with the uretprobe) of the
			// probes' traps, during rec's calls and returns.
			switch {
			case !inKernel && in["leaf"](u[0]):
				leafN += n
				if want(u) {
					leafTruth += n
				}
			case inKernel:
				kern += n
				if want(u) {
					kernTruth += n
				}
			}
			if want(u) {
				got[fmt.Sprintf("kernel=%v %x", inKernel, u[1:])] += n
			}
		}
		t.Logf("%s walk: %d samples in leaf, %d of them with the program's chain; %d in the kernel, %d with it; %d distinct chains with it",
			pass, leafN, leafTruth, kern, kernTruth, len(got))
		if leafN < 100 || kern < 20 {
			t.Fatalf("%s walk: %d samples in leaf and %d in the kernel in 1.5 s at 997 Hz: too few to judge", pass, leafN, kern)
		}
		// A sample in leaf's first instructions, before its frame is
		// set up, misses one frame: a few.
		if leafTruth*100 < leafN*95 {
			t.Errorf("%s walk: %d of %d samples in leaf carry the program's chain", pass, leafTruth, leafN)
		}
		// Without the uretprobe the kernel's samples are its system
		// calls'.
		if pass != "uretprobe" && kernTruth*100 < kern*95 {
			t.Errorf("%s walk: %d of %d samples in the kernel carry the program's chain", pass, kernTruth, kern)
		}
		chains[pass] = got
	}
	// The same process, so the same addresses: the program's chains that
	// most samples carry are the same in each pass.
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
	for _, pass := range []string{"kernel", "uretprobe"} {
		if own, other := top(chains["own"]), top(chains[pass]); !slices.Equal(own, other) {
			t.Errorf("chains of 10 samples or more differ between the own walk and the %s pass:\nown:   %s\n%s: %s", pass, strings.Join(own, "\n       "), pass, strings.Join(other, "\n       "))
		}
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
	syms, text := elfSymbols(t, prog)
	in := map[string]func(uint64) bool{}
	for _, s := range syms {
		if slices.Contains(names, s.Name) && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			lo, hi := s.Value, s.Value+s.Size
			in[s.Name] = func(a uint64) bool { return a >= lo && a < hi }
		}
	}
	if text != nil {
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

// elfSymbols returns program prog's symbol table and its .text section
// (nil if none).
func elfSymbols(t *testing.T, prog string) ([]elf.Symbol, *elf.Section) {
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
	return syms, f.Section(".text")
}

// TestOffCPUUserStackWalk: an off-CPU sample's user stack, walked by
// on_switch itself at the switch-out (offcpu_user_stack, bpf/cacheheat.c)
// and sent through the ring ahead of the sample, is the program's call
// chain, as the kernel's walk for offcpu_stacks (kernelUserStacks) gives
// it: the sleep's system call in leaf, the return addresses into rec (21:
// leaf's and those of rec 0..19), then main's. Each sample carries the
// stack of its own switch-out; none is left without one (aggregate.bad).
func TestOffCPUUserStackWalk(t *testing.T) {
	needBPF(t)
	// 20 deep into a leaf that sleeps 40 ms at a time by a raw nanosleep
	// system call: no libc function sits between leaf and the kernel, so
	// the frame-pointer chain at the switch-out is the program's own (a
	// libc wrapper without a frame would hide its caller from either
	// walk).
	cmd, _, in, chain := startDeep(t, "sleepdeep", "#include <time.h>", `	struct timespec ts = {0, 40000000};
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(35L), "D"(&ts), "S"(0L) : "rcx", "r11", "memory");
	sink += ret;`, 20)
	want := func(u []uint64) bool { return len(u) > 0 && in["leaf"](u[0]) && chain(u) }
	chains := map[string][]string{}
	for _, pass := range []string{"own", "kernel"} {
		kernelUserStacks = pass == "kernel"
		k := pidKernel(t, cmd.Process.Pid, 99, 0)
		kernelUserStacks = false
		time.Sleep(2 * time.Second)
		a, err := k.samples.take()
		if err != nil {
			t.Fatal(err)
		}
		var keys, truth, own int
		for key := range a.counts {
			if int(key.slot) != slotOffCPU || int(key.pid) != cmd.Process.Pid {
				continue
			}
			var u []uint64
			if key.ustack == ownUstack {
				own++
				if key.stack < 0 {
					t.Errorf("%s walk: an off-CPU sample with ustack OWN_USTACK has no stack", pass)
					continue
				}
				p := a.stacks[key.stack]
				u = words(p.frames[p.klen:])
			} else {
				u = k.offcpuStack(key.ustack)
			}
			keys++
			if want(u) {
				truth++
				chains[pass] = append(chains[pass], fmt.Sprintf("%x", u[1:]))
			}
		}
		k.close()
		t.Logf("%s walk: %d off-CPU sample keys, %d with the program's chain, %d through the ring", pass, keys, truth, own)
		if keys == 0 {
			t.Fatalf("%s walk: no off-CPU samples of the sleeper in 2 s (50 sleeps of 40 ms)", pass)
		}
		if truth != keys {
			t.Errorf("%s walk: %d of %d off-CPU samples carry the program's chain", pass, truth, keys)
		}
		if pass == "own" && own != keys {
			t.Errorf("own walk: %d of %d off-CPU samples' user stacks came through the ring", own, keys)
		}
		if pass == "kernel" && own != 0 {
			t.Errorf("kernel walk: %d off-CPU samples' user stacks came through the ring; want none", own)
		}
		if a.bad != 0 {
			t.Errorf("%s walk: %d records unread or samples without their stack record", pass, a.bad)
		}
	}
	// The same process, so the same addresses below the system call.
	slices.Sort(chains["own"])
	slices.Sort(chains["kernel"])
	if o, kw := slices.Compact(chains["own"]), slices.Compact(chains["kernel"]); !slices.Equal(o, kw) {
		t.Errorf("off-CPU chains differ between the walks:\nown:    %s\nkernel: %s", strings.Join(o, "\n        "), strings.Join(kw, "\n        "))
	}
}
