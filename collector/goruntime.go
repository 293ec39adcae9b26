package collector

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"github.com/cacheheat/cacheheat/bpf"
)

// errNotGo says a binary is not a Go program with the DWARF needed to
// find its goroutines (stripped, or another language).
var errNotGo = errors.New("not a go binary with runtime dwarf")

// goOffsets reads from a Go binary's DWARF the offsets of the runtime's
// fields that the BPF side follows to walk a locked goroutine's stack (see
// go_locked_stack in bpf/cacheheat.c). They change between Go versions,
// so they come from the binary itself, never from a table.
func goOffsets(path string) (bpf.CacheheatGoOffsets, error) {
	var o bpf.CacheheatGoOffsets
	f, err := elf.Open(path)
	if err != nil {
		return o, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		// The g pointer at fs:-8 is linux/amd64's TLS layout.
		return o, fmt.Errorf("%s: %w (only amd64 goroutines are walked)", path, errNotGo)
	}
	if f.Section(".go.buildinfo") == nil && f.Section(".gopclntab") == nil {
		return o, fmt.Errorf("%s: %w", path, errNotGo)
	}
	d, err := f.DWARF()
	if err != nil {
		return o, fmt.Errorf("%s: %w (%w)", path, errNotGo, err)
	}
	want := map[string]map[string]*uint32{
		"runtime.g":     {"m": &o.G_m, "sched": &o.G_sched},
		"runtime.m":     {"g0": &o.M_g0, "lockedg": &o.M_lockedg},
		"runtime.gobuf": {"pc": &o.GobufPc, "bp": &o.GobufBp},
	}
	found := 0
	r := d.Reader()
	for found < 6 {
		e, err := r.Next()
		if err != nil {
			return o, fmt.Errorf("reading dwarf of %s: %w", path, err)
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit {
			continue // the types are its children
		}
		if e.Tag != dwarf.TagStructType {
			if e.Children {
				r.SkipChildren()
			}
			continue
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		fields, ok := want[name]
		if !ok || !e.Children {
			if e.Children {
				r.SkipChildren()
			}
			continue
		}
		delete(want, name)
		for {
			c, err := r.Next()
			if err != nil || c == nil || c.Tag == 0 {
				break
			}
			fn, _ := c.Val(dwarf.AttrName).(string)
			if dst, ok := fields[fn]; ok {
				if off, ok := c.Val(dwarf.AttrDataMemberLoc).(int64); ok {
					*dst = uint32(off)
					found++
				}
			}
		}
	}
	if found < 6 {
		return o, fmt.Errorf("%s: %w (found %d of 6 runtime fields)", path, errNotGo, found)
	}
	return o, nil
}

// goProcs tells the BPF side which target processes are Go programs.
type goProcs struct {
	mu sync.Mutex
	// done maps a pid to the binary it was checked with: a command's
	// pid is checked again once it has exec'd its own binary.
	done map[int]string
	// byExe caches each binary's offsets (nil: not a Go binary we can
	// walk), so that a binary's DWARF is read once, not once a process.
	byExe map[string]*bpf.CacheheatGoOffsets
	// gen counts the changes of the go_procs map, told to the BPF side
	// after each (go_gen in bpf/cacheheat.c): a thread there keeps "not
	// a Go program" until the count moves.
	gen uint32
}

func newGoProcs() *goProcs {
	return &goProcs{done: map[int]string{}, byExe: map[string]*bpf.CacheheatGoOffsets{}}
}

// add registers pid's offsets when it is a Go program, or removes them when
// it no longer is. A process that is gone or unreadable is not walked.
func (g *goProcs) add(k *kernel, pid int) {
	if g == nil || runtime.GOARCH != "amd64" {
		return
	}
	exe := "/proc/" + strconv.Itoa(pid) + "/exe"
	target, err := os.Readlink(exe)
	if err != nil {
		return
	}
	g.register(k, pid, target, exe)
}

// addCommand registers a command's offsets from the binary it is about to
// exec, before it is released: its threads may block from their first
// moments, and the stacks taken then need the goroutines' too. The BPF side
// keeps them across that exec (on_exec); a later exec drops them, and add
// checks the new binary.
func (g *goProcs) addCommand(k *kernel, pid int, path string) {
	if g == nil || runtime.GOARCH != "amd64" {
		return
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	g.register(k, pid, path, path)
}

// register sets pid's offsets from binary target, read at path (the same
// file: /proc/PID/exe or the binary itself).
func (g *goProcs) register(k *kernel, pid int, target, path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev, ok := g.done[pid]; ok && prev == target {
		return
	}
	g.done[pid] = target
	o, seen := g.byExe[target]
	if !seen {
		if off, err := goOffsets(path); err == nil {
			o = &off
		}
		g.byExe[target] = o
	}
	var err error
	if o == nil {
		err = k.objs.GoProcs.Delete(uint32(pid)) // mostly none to delete
	} else {
		err = k.objs.GoProcs.Put(uint32(pid), *o) // full: that process is not walked
	}
	if err != nil {
		return // nothing changed
	}
	// After the change: a thread that reads the new count looks the map
	// up again and finds the entry.
	g.gen++
	_ = k.objs.GoGen.Set(g.gen)
}
