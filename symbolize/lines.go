package symbolize

import (
	"debug/dwarf"
	"debug/elf"
	"debug/gosym"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cacheheat/cacheheat/profile"
)

// Source lines are resolved when a recording is read (report, export), on
// the host it was made on, from the files its frames name: a frame keeps
// its module's path, its file offset and the file's build id, which is
// enough to find the file again and to tell whether it changed since.
// DWARF's line table and inlined subroutines give C, C++, Rust and Go
// (whose DWARF describes its inlining too) a chain of frames per address;
// a Go binary without DWARF (-ldflags=-w) still has its .gopclntab, which
// gives the line of the outermost function.

// Line is one source position of an address: the function and the file
// and line in it. An address in inlined code has one Line per level,
// innermost first; every Line but the last is Inlined into the next.
type Line struct {
	Function string
	File     string
	Line     int
	Inlined  bool
}

// Lines resolves frames to source lines, each file once. It is safe for
// concurrent use.
type Lines struct {
	root  string
	mu    sync.Mutex
	files map[lineKey]*lineFile
	// recorded are lines resolved when recordings ended (AddRecorded).
	recorded map[lineKey]map[uint64][]Line
}

type lineKey struct{ path, buildID string }

// NewLines returns a line resolver for files on this host.
func NewLines() *Lines { return NewLinesWithRoot("/") }

// NewLinesWithRoot reads files under root instead of "/".
func NewLinesWithRoot(root string) *Lines {
	return &Lines{root: root, files: map[lineKey]*lineFile{}, recorded: map[lineKey]map[uint64][]Line{}}
}

// Errors a file's lines can fail with, said once per file.
var (
	ErrNoDebugInfo    = errors.New("no line information (no DWARF, no Go line table)")
	ErrBinaryChanged  = errors.New("the file changed since the recording (another build id)")
	ErrNotRegularFile = errors.New("not a regular file")
	ErrDebugTooLarge  = errors.New("debug information too large to read here")
)

// maxDebugBytes bounds the debug sections read from one file: a file is
// whatever a target mapped, and a hostile one must not make a reader use
// gigabytes.
const maxDebugBytes = 1 << 30

// Resolve returns the source lines of f, innermost first, or nil and why
// not (an error naming the file: missing, changed, no debug information).
// A frame without a module path (the kernel, anonymous code) has none.
func (l *Lines) Resolve(f profile.Frame) ([]Line, error) {
	if !strings.HasPrefix(f.Module, "/") {
		return nil, nil
	}
	if lines, ok := l.recordedLines(f.Module, f.BuildID, f.Offset); ok {
		return lines, nil
	}
	lf := l.file(f.Module, f.BuildID)
	if lf.err != nil {
		return nil, lf.err
	}
	return lf.lines(f.Offset), nil
}

// ResolveCaller is Resolve for a caller's frame, whose offset is a return
// address: the instruction after the call. The call is the byte before
// it (as pprof and addr2line users do), so a call that ends a block is
// not given the next line, or the function's closing brace.
func (l *Lines) ResolveCaller(f profile.Frame) ([]Line, error) {
	if f.Offset > 0 {
		f.Offset--
	}
	return l.Resolve(f)
}

func (l *Lines) file(path, buildID string) *lineFile {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := lineKey{path, buildID}
	lf, ok := l.files[k]
	if !ok {
		lf = openLineFile(filepath.Join(l.root, strings.TrimSuffix(path, " (deleted)")), path, buildID, maxDebugBytes)
		l.files[k] = lf
	}
	return lf
}

// lineFile is one file's line information.
type lineFile struct {
	name string
	err  error
	mu   sync.Mutex
	segs []segment
	d    *dwarf.Data
	cus  []cuRange // sorted by low
	// tree holds each compilation unit's subprograms, parsed on first use.
	tree  map[dwarf.Offset][]*dieNode
	gosym *gosym.Table
	cache map[uint64][]Line
}

type cuRange struct {
	low, high uint64
	cu        *dwarf.Entry
}

// dieNode is a subprogram or inlined subroutine with its address ranges.
type dieNode struct {
	ranges   [][2]uint64
	name     string
	callFile string
	callLine int
	children []*dieNode
}

// dwarfSections are the DWARF sections line resolution reads: the
// compilation units and their inlined subroutines (abbrev, info, str,
// str_offsets, addr), their address ranges (ranges, rnglists) and the
// line programs (line, line_str). elf.File.DWARF inflates every debug
// section, location lists and call frame information too: in a Go
// binary a third of the time that resolving lines for a report took.
var dwarfSections = []string{"abbrev", "info", "str", "line", "ranges", "rnglists", "addr", "line_str", "str_offsets"}

// loadDWARF reads f's dwarfSections, inflating compressed ones at once on
// as many CPUs. Relocatable objects and the old .zdebug_ compression are
// left to elf.File.DWARF, which handles them.
func loadDWARF(f *elf.File) (*dwarf.Data, error) {
	if f.Type == elf.ET_REL {
		return f.DWARF()
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".zdebug_") {
			return f.DWARF()
		}
	}
	data := make([][]byte, len(dwarfSections))
	errs := make([]error, len(dwarfSections))
	var wg sync.WaitGroup
	for i, name := range dwarfSections {
		s := f.Section(".debug_" + name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A goroutine's panic is not the caller's to recover.
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("%s: %v", s.Name, p)
				}
			}()
			data[i], errs[i] = s.Data()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sec := func(name string) []byte { return data[slices.Index(dwarfSections, name)] }
	d, err := dwarf.New(sec("abbrev"), nil, nil, sec("info"), sec("line"), nil, sec("ranges"), sec("str"))
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"rnglists", "addr", "line_str", "str_offsets"} {
		if b := sec(name); b != nil {
			if err := d.AddSection(".debug_"+name, b); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

func openLineFile(path, name, buildID string, maxDebug uint64) (lf *lineFile) {
	lf = &lineFile{name: name, cache: map[uint64][]Line{}}
	defer func() {
		// debug/dwarf and debug/elf are not hardened against every
		// malformed file.
		if p := recover(); p != nil {
			lf.err, lf.d, lf.gosym = fmt.Errorf("%s: reading debug information: %v", name, p), nil, nil
		}
	}()
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		lf.err = fmt.Errorf("%s: %w", name, err)
		return lf
	case !fi.Mode().IsRegular():
		lf.err = fmt.Errorf("%s: %w", name, ErrNotRegularFile)
		return lf
	}
	f, err := elf.Open(path)
	if err != nil {
		lf.err = fmt.Errorf("%s: %w", name, err)
		return lf
	}
	defer f.Close()
	if buildID != "" {
		got := hex.EncodeToString(buildIDOf(f))
		if got == "" {
			got = goBuildID(f)
		}
		if got != buildID {
			lf.err = fmt.Errorf("%s: %w", name, ErrBinaryChanged)
			return lf
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Filesz > 0 {
			lf.segs = append(lf.segs, segment{off: p.Off, filesz: p.Filesz, vaddr: p.Vaddr})
		}
	}
	var debugBytes uint64
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			debugBytes += s.Size
		}
	}
	tooLarge := debugBytes > maxDebug
	if !tooLarge {
		if d, err := loadDWARF(f); err == nil {
			lf.d = d
			lf.indexUnits()
		}
	}
	if len(lf.cus) == 0 {
		lf.d = nil
		lf.gosym = goLineTable(f) // a Go binary's line table is cheap to read
	}
	switch {
	case lf.d == nil && lf.gosym == nil && tooLarge:
		lf.err = fmt.Errorf("%s: %w (%d MiB)", name, ErrDebugTooLarge, debugBytes>>20)
	case lf.d == nil && lf.gosym == nil:
		lf.err = fmt.Errorf("%s: %w", name, ErrNoDebugInfo)
	}
	return lf
}

// buildIDOf is buildID, for a file opened here.
func buildIDOf(f *elf.File) []byte { return buildID(f) }

// goLineTable reads a Go binary's .gopclntab, nil when it has none.
func goLineTable(f *elf.File) *gosym.Table {
	sec := f.Section(".gopclntab")
	text := f.Section(".text")
	if sec == nil || text == nil {
		return nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil
	}
	t, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil
	}
	return t
}

// indexUnits lists the compilation units by address range.
func (lf *lineFile) indexUnits() {
	r := lf.d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit {
			ranges, err := lf.d.Ranges(e)
			if err == nil {
				for _, rg := range ranges {
					if rg[1] > rg[0] {
						lf.cus = append(lf.cus, cuRange{low: rg[0], high: rg[1], cu: e})
					}
				}
			}
		}
		r.SkipChildren()
	}
	sort.Slice(lf.cus, func(i, j int) bool { return lf.cus[i].low < lf.cus[j].low })
}

// vaddr turns a file offset into the link-time address debug info uses.
func (lf *lineFile) vaddr(off uint64) (uint64, bool) {
	for _, s := range lf.segs {
		if off >= s.off && off-s.off < s.filesz {
			return off - s.off + s.vaddr, true
		}
	}
	return 0, false
}

// lines resolves one file offset, cached.
func (lf *lineFile) lines(off uint64) (out []Line) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if l, ok := lf.cache[off]; ok {
		return l
	}
	defer func() {
		if p := recover(); p != nil {
			out = nil
		}
		lf.cache[off] = out
	}()
	pc, ok := lf.vaddr(off)
	if !ok {
		return nil
	}
	if lf.gosym != nil {
		file, line, fn := lf.gosym.PCToLine(pc)
		if fn == nil {
			return nil
		}
		return []Line{{Function: fn.Name, File: file, Line: line}}
	}
	return lf.dwarfLines(pc)
}

// dwarfLines is the inline chain at pc: the line table's line for the
// innermost function, then for each enclosing level the call site the
// inlined subroutine records.
func (lf *lineFile) dwarfLines(pc uint64) []Line {
	i := sort.Search(len(lf.cus), func(i int) bool { return lf.cus[i].high > pc })
	if i == len(lf.cus) || pc < lf.cus[i].low {
		return nil
	}
	cu := lf.cus[i].cu
	lr, err := lf.d.LineReader(cu)
	if err != nil || lr == nil {
		return nil
	}
	var le dwarf.LineEntry
	if err := lr.SeekPC(pc, &le); err != nil {
		return nil
	}
	file, line := "", le.Line
	if le.File != nil {
		file = le.File.Name
	}
	chain := lf.chain(cu, pc) // outermost first
	if len(chain) == 0 {
		return []Line{{File: file, Line: line}}
	}
	files := lineFiles(lr)
	out := make([]Line, 0, len(chain))
	for j := len(chain) - 1; j >= 0; j-- {
		out = append(out, Line{Function: chain[j].name, File: file, Line: line, Inlined: j > 0})
		// The enclosing level is at this one's call site.
		file, line = chain[j].callFile, chain[j].callLine
		if f, ok := files[chain[j].callFile]; ok {
			file = f
		}
	}
	return out
}

// lineFiles names the line table's files by their index, as the call
// file attributes refer to them.
func lineFiles(lr *dwarf.LineReader) map[string]string {
	out := map[string]string{}
	for i, f := range lr.Files() {
		if f != nil {
			out[fmt.Sprint(i)] = f.Name
		}
	}
	return out
}

// chain returns the subprogram holding pc and the inlined subroutines
// nested in it that hold pc, outermost first.
func (lf *lineFile) chain(cu *dwarf.Entry, pc uint64) []*dieNode {
	if lf.tree == nil {
		lf.tree = map[dwarf.Offset][]*dieNode{}
	}
	top, ok := lf.tree[cu.Offset]
	if !ok {
		top = lf.parseUnit(cu)
		lf.tree[cu.Offset] = top
	}
	var out []*dieNode
	nodes := top
	for {
		var hit *dieNode
		for _, n := range nodes {
			if n.holds(pc) {
				hit = n
				break
			}
		}
		if hit == nil {
			return out
		}
		out = append(out, hit)
		nodes = hit.children
	}
}

func (n *dieNode) holds(pc uint64) bool {
	for _, r := range n.ranges {
		if pc >= r[0] && pc < r[1] {
			return true
		}
	}
	return false
}

// parseUnit reads a compilation unit's subprograms and their inlined
// subroutines, with names (through abstract origins and specifications)
// and call sites.
func (lf *lineFile) parseUnit(cu *dwarf.Entry) []*dieNode {
	r := lf.d.Reader()
	r.Seek(cu.Offset)
	if e, err := r.Next(); err != nil || e == nil || !e.Children {
		return nil
	}
	var top []*dieNode
	var stack []*dieNode // open subprogram/inlined nodes, nil for other DIEs with children
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == 0 {
			if len(stack) == 0 {
				break // the unit's end
			}
			stack = stack[:len(stack)-1]
			continue
		}
		var n *dieNode
		if e.Tag == dwarf.TagSubprogram || e.Tag == dwarf.TagInlinedSubroutine {
			if ranges, err := lf.d.Ranges(e); err == nil && len(ranges) > 0 {
				n = &dieNode{ranges: ranges, name: lf.nameOf(e)}
				if e.Tag == dwarf.TagInlinedSubroutine {
					n.callFile = fmt.Sprint(e.Val(dwarf.AttrCallFile))
					if l, ok := e.Val(dwarf.AttrCallLine).(int64); ok {
						n.callLine = int(l)
					}
				}
				var parent *dieNode
				for k := len(stack) - 1; k >= 0; k-- {
					if stack[k] != nil {
						parent = stack[k]
						break
					}
				}
				if parent == nil {
					top = append(top, n)
				} else {
					parent.children = append(parent.children, n)
				}
			}
		}
		if e.Children {
			stack = append(stack, n)
		}
	}
	return top
}

// nameOf names a subprogram or inlined subroutine: its linkage or plain
// name, else its abstract origin's or specification's.
func (lf *lineFile) nameOf(e *dwarf.Entry) string {
	for range 4 {
		if s, ok := e.Val(dwarf.AttrName).(string); ok {
			return s
		}
		var next dwarf.Offset
		switch {
		case e.Val(dwarf.AttrAbstractOrigin) != nil:
			next, _ = e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		case e.Val(dwarf.AttrSpecification) != nil:
			next, _ = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		default:
			return ""
		}
		r := lf.d.Reader()
		r.Seek(next)
		ne, err := r.Next()
		if err != nil || ne == nil {
			return ""
		}
		e = ne
	}
	return ""
}

// Source is a source file's text, read for a report on the recording's
// host: nil, and why, when the path is not a regular file (never a
// device or FIFO: it is stat'ed first), is larger than maxSource, or
// cannot be read.
func Source(root, path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("no file")
	}
	full := filepath.Join(root, path)
	fi, err := os.Stat(full) // follows a symlink: its target must be a regular file too
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegularFile)
	}
	if fi.Size() > maxSource {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxSource)
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSource))
}

// maxSource bounds a source file read for a report.
const maxSource = 8 << 20
