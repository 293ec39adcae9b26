package symbolize

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cacheheat/cacheheat/profile"
)

// ErrKernelHidden means /proc/kallsyms lists its symbols with zero
// addresses: the kernel hides them from readers without CAP_SYSLOG (or
// from everyone, with kernel.kptr_restrict=2).
var ErrKernelHidden = errors.New("kernel symbol addresses are hidden")

// kernelSyms is the kernel's function table, loaded once on first use.
type kernelSyms struct {
	once  sync.Once
	table *funcTable
	// modules[aux] names an entry's module; modules[0] is ModuleKernel.
	modules []string
	// bases[aux] is what a frame's offset is relative to: _text for the
	// kernel (stable across KASLR reboots), the lowest symbol of a module.
	bases []uint64
	err   error
}

// KernelAvailable loads /proc/kallsyms if needed and returns why kernel
// addresses cannot be resolved (ErrKernelHidden, a read error), or nil.
func (s *Symbolizer) KernelAvailable() error {
	s.loadKernel()
	return s.kernel.err
}

// Kernel resolves kernel addresses, one frame per address in the same
// order. Module is "[kernel]" or the loaded module's name in brackets.
// When kallsyms is unavailable each frame is [kernel]+raw address.
func (s *Symbolizer) Kernel(addrs []uint64) []profile.Frame {
	s.loadKernel()
	k := &s.kernel
	frames := make([]profile.Frame, len(addrs))
	for i, a := range addrs {
		e, ok := k.table.find(a)
		if !ok {
			frames[i] = profile.Frame{Module: ModuleKernel, Offset: a}
			continue
		}
		off := a
		if base := k.bases[e.aux]; a >= base {
			off = a - base
		}
		frames[i] = profile.Frame{Function: k.table.name(e), Module: k.modules[e.aux], Offset: off}
	}
	return frames
}

func (s *Symbolizer) loadKernel() {
	s.kernel.once.Do(func() {
		path := filepath.Join(s.root, "proc", "kallsyms")
		f, err := os.Open(path)
		if err != nil {
			s.kernel.err = fmt.Errorf("reading kernel symbols: %w", err)
			return
		}
		defer f.Close()
		k, err := parseKallsyms(bufio.NewScanner(f))
		if err != nil {
			s.kernel.err = fmt.Errorf("reading %s: %w", path, err)
			return
		}
		if k.table.len() == 0 {
			restrict, _ := os.ReadFile(filepath.Join(s.root, "proc", "sys", "kernel", "kptr_restrict"))
			s.kernel.err = fmt.Errorf("%w: %s lists zero addresses (kernel.kptr_restrict=%s): run as root or with CAP_SYSLOG",
				ErrKernelHidden, path, strings.TrimSpace(string(restrict)))
			return
		}
		s.kernel.table, s.kernel.modules, s.kernel.bases = k.table, k.modules, k.bases
	})
}

// parseKallsyms keeps the text symbols of a /proc/kallsyms listing:
// "ADDR TYPE NAME" with an optional "\t[MODULE]". Zero addresses (hidden)
// are dropped, so a hidden listing gives an empty table.
func parseKallsyms(sc *bufio.Scanner) (*kernelSyms, error) {
	k := &kernelSyms{modules: []string{ModuleKernel}, bases: []uint64{0}}
	modIndex := map[string]uint32{}
	var syms []funcSym
	var text uint64
	for sc.Scan() {
		line := sc.Text()
		addrS, rest, ok1 := strings.Cut(line, " ")
		typ, rest, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || len(typ) != 1 {
			continue
		}
		name, mod, _ := strings.Cut(rest, "\t")
		if name == "_text" && mod == "" {
			text, _ = strconv.ParseUint(addrS, 16, 64)
		}
		rank := 0
		switch typ[0] {
		case 'T':
		case 't':
			rank = 1
		case 'W', 'w':
			rank = 2
		default:
			continue // data, absolute and undefined symbols are not code
		}
		// __pfx_ and __cfi_ symbols mark the padding in front of each
		// function; a lookup lands in the function either way, and
		// skipping them halves the table.
		if strings.HasPrefix(name, "__pfx_") || strings.HasPrefix(name, "__cfi_") {
			continue
		}
		addr, err := strconv.ParseUint(addrS, 16, 64)
		if err != nil || addr == 0 {
			continue
		}
		var aux uint32
		if mod != "" {
			mod = strings.TrimSpace(mod)
			i, ok := modIndex[mod]
			if !ok {
				i = uint32(len(k.modules))
				modIndex[mod] = i
				k.modules = append(k.modules, mod)
				k.bases = append(k.bases, addr)
			}
			k.bases[i] = min(k.bases[i], addr)
			aux = i
		}
		syms = append(syms, funcSym{addr: addr, name: name, rank: rank, aux: aux})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	k.bases[0] = text
	k.table = newFuncTable(syms)
	return k, nil
}
