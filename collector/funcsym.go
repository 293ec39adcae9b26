package collector

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/arch/x86/x86asm"

	"github.com/cacheheat/cacheheat/profile"
)

// FuncSpec is one --func argument: a symbol, and the executable or
// library that holds it ("" for the target's main executable).
type FuncSpec struct {
	Path   string
	Symbol string
}

// ParseFuncSpec splits "[PATH:]SYMBOL". A prefix before the first colon is
// a path only when it contains a slash, so "./srv:main.handle" names a file
// and a symbol with colons of its own is left whole.
func ParseFuncSpec(s string) (FuncSpec, error) {
	if i := strings.IndexByte(s, ':'); i > 0 && strings.Contains(s[:i], "/") {
		if s[i+1:] == "" {
			return FuncSpec{}, fmt.Errorf("--func %q: no symbol after the path", s)
		}
		return FuncSpec{Path: s[:i], Symbol: s[i+1:]}, nil
	}
	if s == "" {
		return FuncSpec{}, errors.New("--func: empty symbol")
	}
	return FuncSpec{Symbol: s}, nil
}

// funcProbe is a resolved --func function: where its entry and return
// probes go.
type funcProbe struct {
	spec   profile.FunctionSpec
	symbol string
	// entry is the entry probe's offset from the symbol: past a Go
	// function's stack check (see goEntryOffset), else 0.
	entry uint64
	// rets are the offsets of a Go function's RET instructions.
	rets []uint64
}

// mainExecutable is the binary --func functions without a path are looked
// up in: the command's, or the first -p process's.
func mainExecutable(t Target) (string, error) {
	switch t.Kind {
	case profile.TargetCommand:
		if len(t.Command) == 0 {
			return "", fmt.Errorf("%w: no command", ErrNoTarget)
		}
		p, err := exec.LookPath(t.Command[0])
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoTarget, err)
		}
		return filepath.Abs(p)
	case profile.TargetPID:
		if len(t.PIDs) == 0 {
			return "", fmt.Errorf("%w: no pid", ErrNoTarget)
		}
		p, err := os.Readlink("/proc/" + strconv.Itoa(t.PIDs[0]) + "/exe")
		if err != nil {
			return "", fmt.Errorf("%w: reading the executable of pid %d: %w", ErrNoTarget, t.PIDs[0], err)
		}
		return p, nil
	}
	return "", fmt.Errorf("%w: --func SYMBOL needs a PATH:SYMBOL with -a and -G (there is no main executable)", ErrNoTarget)
}

// resolveFunc finds a function in its binary and, for Go, where its entry
// and returns are probed.
func resolveFunc(id int, fs FuncSpec, mainExe string) (*funcProbe, error) {
	path := fs.Path
	if path == "" {
		path = mainExe
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --func %s: %w", ErrNoTarget, fs.Symbol, err)
	}
	f, err := elf.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: --func %s: opening %s: %w", ErrNoTarget, fs.Symbol, abs, err)
	}
	defer f.Close()
	sym, err := findFuncSymbol(f, fs.Symbol)
	if err != nil {
		return nil, fmt.Errorf("%w: --func %s in %s: %w", ErrNoTarget, fs.Symbol, abs, err)
	}
	p := &funcProbe{
		symbol: fs.Symbol,
		spec: profile.FunctionSpec{
			ID: id, Name: fs.Symbol, Binary: abs, Lang: profile.LangC, ReturnProbes: 1,
			Counters: append([]string(nil), profile.FunctionCounters...),
		},
	}
	bi, err := buildinfo.ReadFile(abs)
	if err != nil {
		return p, nil // not Go: a uretprobe is safe
	}
	// Go: returns are probed at RET instructions (docs/FUNCTIONS.md). The
	// goroutine is read from R14, which needs amd64 and the register ABI
	// (Go 1.17).
	if f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("%w: --func %s: Go functions are supported on amd64 only, %s is %v", ErrHost, fs.Symbol, abs, f.Machine)
	}
	if !goRegABI(bi.GoVersion) {
		return nil, fmt.Errorf("%w: --func %s: %s was built with %s; Go functions need Go 1.17 or later (register ABI)", ErrHost, fs.Symbol, abs, bi.GoVersion)
	}
	code, err := symbolCode(f, sym)
	if err != nil {
		return nil, fmt.Errorf("%w: --func %s: %w", ErrNoTarget, fs.Symbol, err)
	}
	p.entry, p.rets, err = goProbeOffsets(code)
	if err != nil {
		return nil, fmt.Errorf("%w: --func %s: %w", ErrNoTarget, fs.Symbol, err)
	}
	p.spec.Lang = profile.LangGo
	p.spec.ReturnProbes = len(p.rets)
	return p, nil
}

// goRegABI says whether a "go1.N..." version uses the register ABI on
// amd64 (1.17 and later).
func goRegABI(v string) bool {
	v = strings.TrimPrefix(v, "go")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	digits := parts[1]
	if i := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		digits = digits[:i] // "21rc2"
	}
	min, err2 := strconv.Atoi(digits)
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > 1 || min >= 17
}

func findFuncSymbol(f *elf.File, name string) (elf.Symbol, error) {
	for _, get := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		syms, err := get()
		if err != nil {
			continue
		}
		for _, s := range syms {
			if s.Name == name && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
				return s, nil
			}
		}
	}
	return elf.Symbol{}, errors.New("no such function symbol (stripped binary, inlined or misspelled?)")
}

// symbolCode reads a function's machine code.
func symbolCode(f *elf.File, s elf.Symbol) ([]byte, error) {
	if s.Size == 0 {
		return nil, errors.New("symbol has no size")
	}
	for _, sec := range f.Sections {
		if sec.Type != elf.SHT_PROGBITS || s.Value < sec.Addr || s.Value+s.Size > sec.Addr+sec.Size {
			continue
		}
		code := make([]byte, s.Size)
		if _, err := sec.ReadAt(code, int64(s.Value-sec.Addr)); err != nil {
			return nil, fmt.Errorf("reading the code: %w", err)
		}
		return code, nil
	}
	return nil, errors.New("symbol lies in no section with code")
}

// goProbeOffsets disassembles a Go function and returns where its entry
// probe goes and the offsets of its RET instructions.
//
// The entry probe goes past the stack-bound check of the prologue (CMP of
// the stack pointer with g.stackguard0 at 16(R14), then JBE to a call of
// runtime.morestack): when the stack must grow, morestack copies it and
// restarts the function from its first instruction, so a probe there would
// fire twice for one call. Functions without the check (NOSPLIT) are
// entered at 0.
func goProbeOffsets(code []byte) (entry uint64, rets []uint64, err error) {
	var insts []x86asm.Inst
	var offs []uint64
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return 0, nil, fmt.Errorf("disassembling at +%#x: %w", off, err)
		}
		insts = append(insts, in)
		offs = append(offs, uint64(off))
		if in.Op == x86asm.RET {
			rets = append(rets, uint64(off))
		}
		off += in.Len
	}
	if len(rets) == 0 {
		return 0, nil, errors.New("no RET instruction (a function that never returns?)")
	}
	for i := 0; i+1 < len(insts) && i < 6; i++ {
		if isStackGuardCmp(insts[i]) && insts[i+1].Op == x86asm.JBE {
			return offs[i+1] + uint64(insts[i+1].Len), rets, nil
		}
	}
	return 0, rets, nil
}

// isStackGuardCmp matches CMP reg, [R14+0x10]: a comparison with the
// goroutine's stackguard0.
func isStackGuardCmp(in x86asm.Inst) bool {
	if in.Op != x86asm.CMP {
		return false
	}
	for _, a := range in.Args {
		if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.R14 && m.Disp == 16 {
			return true
		}
	}
	return false
}
