package symbolize

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/unix"
)

// object is the symbol index of one ELF file, shared by every process that
// maps it. It is immutable once indexed.
type object struct {
	name string // the mapped path, for errors
	// file is open while indexing is deferred (Symbolizer.ready).
	file *os.File
	// segs translate a file offset (what a mapping gives) into the link-time
	// virtual address the symbol tables use; this is also what makes PIE and
	// shared libraries work wherever they were loaded.
	segs []segment
	// tables are consulted in order: .gopclntab, .symtab, .dynsym.
	tables []*funcTable
	// err says why the file could not be indexed (not ELF, unreadable);
	// its frames then keep module+offset.
	err error
	// buildID identifies the file's contents: the GNU build id in hex, or
	// a Go binary's build id; empty when it has neither.
	buildID string
	// path and inode find the file again to check return addresses
	// (unwind.go): reader is open while it is needed, readerErr set when
	// it cannot be opened, calls caches each offset's answer.
	path      string
	inode     uint64
	reader    *os.File
	readerErr bool
	calls     map[uint64]bool
}

type segment struct {
	off, filesz, vaddr uint64
}

// resolve returns the function at file offset off.
func (o *object) resolve(off uint64) (string, bool) {
	if o == nil {
		return "", false
	}
	for _, s := range o.segs {
		if off >= s.off && off-s.off < s.filesz {
			vaddr := off - s.off + s.vaddr
			for _, t := range o.tables {
				if name, ok := t.lookup(vaddr); ok {
					return name, true
				}
			}
			return "", false
		}
	}
	return "", false
}

// symbols is the number of functions indexed, for tests and diagnostics.
func (o *object) symbols() int {
	n := 0
	for _, t := range o.tables {
		n += t.len()
	}
	return n
}

// loadObject indexes the ELF file read from r. A file without any symbols
// is not an error: its frames keep module+offset.
//
// debugDirs are searched for a separate debug file by build id
// (DIR/.build-id/xx/rest.debug, what distributions' -dbgsym packages
// install) when the file itself has no .symtab.
func loadObject(r io.ReaderAt, debugDirs ...string) (obj *object, err error) {
	err = guarded(func() error {
		obj, err = parseObject(r, debugDirs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// guarded runs fn, a panic in it an error: debug/elf and debug/gosym are
// not hardened against every malformed file, the files come from whatever
// the target process mapped, and a mapped section of a file truncated
// meanwhile faults (SetPanicOnFault makes that a panic too, not a crash).
func guarded(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("parsing elf: %v", p)
		}
	}()
	return fn()
}

func parseObject(r io.ReaderAt, debugDirs []string) (*object, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("parsing elf: %w", err)
	}
	defer f.Close()

	o := &object{buildID: hex.EncodeToString(buildID(f))}
	if o.buildID == "" {
		o.buildID = goBuildID(f)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Filesz > 0 {
			o.segs = append(o.segs, segment{off: p.Off, filesz: p.Filesz, vaddr: p.Vaddr})
		}
	}
	// PLT stubs first: they have no symbols of their own, and the symbol
	// below them (often _init) would otherwise claim them.
	if plt := pltFuncs(f); plt.len() > 0 {
		o.tables = append(o.tables, plt)
	}

	// .symtab is read first because it names runtime.text, which the Go
	// table needs, but it is consulted after .gopclntab.
	big := bigSections{file: fileOf(r)}
	defer big.close()
	symtab, symErr := funcSymbols(f, &big)
	if symErr != nil {
		if syms, err := debugSymbols(f, debugDirs); err == nil {
			symtab, symErr = syms, nil
		}
	}
	var textStart uint64
	for _, s := range symtab {
		if s.Name == "runtime.text" {
			textStart = s.Value
			break
		}
	}
	goTable, lo, hi := goFuncs(f, textStart, &big)
	if goTable != nil {
		o.tables = append(o.tables, goTable)
	}
	var symTable *funcTable
	if symErr == nil {
		// Go functions are already named by .gopclntab; keeping them twice
		// would double the memory of a large Go binary.
		symTable = elfFuncs(symtab, func(s elf.Symbol) bool { return s.Value >= lo && s.Value < hi })
		if symTable.len() > 0 {
			o.tables = append(o.tables, symTable)
		}
	}
	if dynsym, err := f.DynamicSymbols(); err == nil {
		t := elfFuncs(dynsym, func(s elf.Symbol) bool {
			if s.Value >= lo && s.Value < hi {
				return true
			}
			_, dup := symTable.lookup(s.Value)
			return dup
		})
		if t.len() > 0 {
			o.tables = append(o.tables, t)
		}
	}
	return o, nil
}

// funcSymbols returns what loadObject reads of f's .symtab: its function
// symbols and runtime.text. debug/elf's Symbols makes a string of every
// symbol's name; in a Go binary most symbols are Go functions, which
// .gopclntab names anyway, and making their names was a third of what was
// left of indexing this project's own binary. Here each name is a
// substring of one copy of the string table. Files other than 64-bit
// little-endian go to Symbols.
func funcSymbols(f *elf.File, big *bigSections) ([]elf.Symbol, error) {
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return f.Symbols()
	}
	symtab := f.SectionByType(elf.SHT_SYMTAB)
	if symtab == nil || symtab.Link == 0 || int(symtab.Link) >= len(f.Sections) {
		return f.Symbols() // none (ErrNoSymbols), or what Symbols says of it
	}
	data, err := big.data(symtab)
	if err != nil {
		return nil, fmt.Errorf("reading .symtab: %w", err)
	}
	strData, err := big.data(f.Sections[symtab.Link])
	if err != nil {
		return nil, fmt.Errorf("reading .symtab's strings: %w", err)
	}
	strs := string(strData)
	const entry = 24 // Elf64_Sym: name u32, info u8, other u8, shndx u16, value u64, size u64
	// Room for every symbol: growing a slice of these by append cost
	// more than debug/elf's whole read.
	out := make([]elf.Symbol, 0, len(data)/entry)
	for i := entry; i+entry <= len(data); i += entry { // the first is the null symbol
		e := data[i : i+entry]
		info := e[4]
		typ := elf.ST_TYPE(info)
		name := int(binary.LittleEndian.Uint32(e))
		if name >= len(strs) {
			continue
		}
		if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC && !strings.HasPrefix(strs[name:], "runtime.text\x00") {
			continue
		}
		end := strings.IndexByte(strs[name:], 0)
		if end < 0 {
			continue
		}
		out = append(out, elf.Symbol{
			Name:    strs[name : name+end],
			Info:    info,
			Other:   e[5],
			Section: elf.SectionIndex(binary.LittleEndian.Uint16(e[6:])),
			Value:   binary.LittleEndian.Uint64(e[8:]),
			Size:    binary.LittleEndian.Uint64(e[16:]),
		})
	}
	return out, nil
}

// debugSymbols returns the .symtab of f's separate debug file, found by its
// GNU build id.
func debugSymbols(f *elf.File, dirs []string) ([]elf.Symbol, error) {
	id := buildID(f)
	if len(id) < 2 || len(dirs) == 0 {
		return nil, errNoDebugFile
	}
	hexID := hex.EncodeToString(id)
	for _, dir := range dirs {
		df, err := elf.Open(filepath.Join(dir, ".build-id", hexID[:2], hexID[2:]+".debug"))
		if err != nil {
			continue
		}
		syms, err := df.Symbols()
		df.Close()
		if err == nil {
			return syms, nil
		}
	}
	return nil, errNoDebugFile
}

var errNoDebugFile = errors.New("no debug file")

// buildID returns the GNU build id note of f, nil when it has none.
func buildID(f *elf.File) []byte {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		// Notes: namesz, descsz, type, then name and desc, each padded to
		// 4 bytes.
		for len(data) >= 12 {
			namesz := uint64(f.ByteOrder.Uint32(data))
			descsz := uint64(f.ByteOrder.Uint32(data[4:]))
			typ := f.ByteOrder.Uint32(data[8:])
			nameEnd := 12 + (namesz+3)&^3
			descEnd := nameEnd + (descsz+3)&^3
			if descEnd > uint64(len(data)) {
				break
			}
			if typ == 3 && namesz == 4 && string(data[12:15]) == "GNU" { // NT_GNU_BUILD_ID
				return data[nameEnd : nameEnd+descsz]
			}
			data = data[descEnd:]
		}
	}
	return nil
}

// goBuildID returns the build id the Go linker writes in
// .note.go.buildid (note name "Go", type 4), "" when there is none.
func goBuildID(f *elf.File) string {
	s := f.Section(".note.go.buildid")
	if s == nil {
		return ""
	}
	data, err := s.Data()
	if err != nil || len(data) < 16 {
		return ""
	}
	namesz := uint64(f.ByteOrder.Uint32(data))
	descsz := uint64(f.ByteOrder.Uint32(data[4:]))
	nameEnd := 12 + (namesz+3)&^3
	if f.ByteOrder.Uint32(data[8:]) != 4 || namesz != 4 || string(data[12:14]) != "Go" || nameEnd+descsz > uint64(len(data)) {
		return ""
	}
	return string(data[nameEnd : nameEnd+descsz])
}

// elfFuncs builds a table of the function symbols in syms, leaving out
// those skip reports.
func elfFuncs(syms []elf.Symbol, skip func(elf.Symbol) bool) *funcTable {
	var funcs []funcSym
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC {
			continue
		}
		if s.Section == elf.SHN_UNDEF || s.Value == 0 || s.Name == "" || skip(s) {
			continue
		}
		rank := 2
		switch elf.ST_BIND(s.Info) {
		case elf.STB_GLOBAL:
			rank = 0
		case elf.STB_WEAK:
			rank = 1
		}
		// Versioned dynamic names carry their version in Symbol.Version;
		// the name itself is what a reader expects to see.
		funcs = append(funcs, funcSym{addr: s.Value, size: s.Size, name: s.Name, rank: rank})
	}
	return newFuncTable(funcs)
}

// pclntab magic numbers of the Go 1.18 and 1.20+ formats, whose header holds
// runtime.text's address.
const (
	go118magic = 0xfffffff0
	go120magic = 0xfffffff1
)

// goFuncs indexes the functions in the file's .gopclntab and returns the
// table with the range of addresses it covers. It returns nil when the file
// is not a Go binary.
func goFuncs(f *elf.File, textStart uint64, big *bigSections) (_ *funcTable, lo, hi uint64) {
	sect := f.Section(".gopclntab")
	if sect == nil {
		// PIE and externally linked binaries put it in the relro segment.
		sect = f.Section(".data.rel.ro.gopclntab")
	}
	if sect == nil || sect.Type == elf.SHT_NOBITS {
		return nil, 0, 0
	}
	data, err := big.data(sect)
	if err != nil || len(data) < 16 {
		return nil, 0, 0
	}
	if textStart == 0 {
		textStart = goTextStart(f, sect, data)
	}
	if t, lo, hi, ok := goFuncs118(data, textStart); ok {
		return t, lo, hi
	}
	return gosymFuncs(data, textStart)
}

// gosymFuncs is goFuncs by debug/gosym: for the formats goFuncs118 does
// not read (before Go 1.18, big-endian, 32-bit).
func gosymFuncs(data []byte, textStart uint64) (_ *funcTable, lo, hi uint64) {
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, textStart))
	if err != nil || len(tab.Funcs) == 0 {
		return nil, 0, 0
	}
	funcs := make([]funcSym, 0, len(tab.Funcs))
	lo = ^uint64(0)
	for _, fn := range tab.Funcs {
		if fn.End <= fn.Entry {
			continue
		}
		funcs = append(funcs, funcSym{addr: fn.Entry, size: fn.End - fn.Entry, name: fn.Name})
		lo, hi = min(lo, fn.Entry), max(hi, fn.End)
	}
	if len(funcs) == 0 {
		return nil, 0, 0
	}
	return newFuncTable(funcs), lo, hi
}

// bigSections reads the large sections an index reads once and drops
// (.gopclntab, .symtab and its strings) by mapping them from the file when
// it is one, read-only: no copy and no fresh zeroed buffer. A 26 MB Go
// binary's .gopclntab is 6 MB, and reading it into new memory was half of
// indexing the binary in a recorder, most of it the kernel faulting in and
// zeroing the pages. Nothing indexed points into a mapping (names are
// copied), and close unmaps them all. Other readers, and compressed
// sections, are read as debug/elf reads them.
type bigSections struct {
	file *os.File
	maps [][]byte
}

// fileOf returns r as a file, nil when it is none.
func fileOf(r io.ReaderAt) *os.File {
	f, _ := r.(*os.File)
	return f
}

func (b *bigSections) data(s *elf.Section) ([]byte, error) {
	if b.file == nil || s.Flags&elf.SHF_COMPRESSED != 0 || s.Type == elf.SHT_NOBITS || s.Size == 0 {
		return s.Data()
	}
	st, err := b.file.Stat()
	if err != nil || s.Offset > uint64(st.Size()) || s.Size > uint64(st.Size())-s.Offset {
		return s.Data() // says what is wrong with it
	}
	page := uint64(os.Getpagesize())
	start := s.Offset &^ (page - 1)
	m, err := unix.Mmap(int(b.file.Fd()), int64(start), int(s.Offset-start+s.Size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return s.Data()
	}
	b.maps = append(b.maps, m)
	return m[s.Offset-start:], nil
}

func (b *bigSections) close() {
	for _, m := range b.maps {
		unix.Munmap(m)
	}
	b.maps = nil
}

// goFuncs118 indexes a Go 1.18+ pclntab (little-endian, 8-byte pointers)
// as the runtime reads it (runtime/symtab.go): the header's words give the
// function count and the offsets of funcnametab and of the function table,
// whose entries are (entry offset from runtime.text, offset of the
// function's _func), followed by the end's offset; a _func's second word
// is its name's offset in funcnametab, NUL-terminated. debug/gosym builds
// a Func, a Sym and a map entry for every function first: for this
// project's own 26 MB binary that was two thirds of indexing it, the
// one-time cost of the first process that maps a file. The table's names
// are funcnametab itself, copied once. ok is false for another format or
// a table that does not hold together; goFuncs then uses debug/gosym.
func goFuncs118(data []byte, textStart uint64) (_ *funcTable, lo, hi uint64, ok bool) {
	const words = 8 // nfunc, nfiles, textStart, funcname, cu, filetab, pctab, pcln
	if len(data) < 8+8*words || data[4] != 0 || data[5] != 0 || data[7] != 8 {
		return nil, 0, 0, false
	}
	if m := binary.LittleEndian.Uint32(data); m != go118magic && m != go120magic {
		return nil, 0, 0, false
	}
	word := func(i int) uint64 { return binary.LittleEndian.Uint64(data[8+8*i:]) }
	size := uint64(len(data))
	nfunc, nameStart, nameEnd, pcln := word(0), word(3), word(4), word(7)
	if nfunc == 0 || nameStart > nameEnd || nameEnd > size || pcln > size || (size-pcln)/8 < nfunc+1 {
		return nil, 0, 0, false
	}
	names := data[nameStart:nameEnd]
	ftab := data[pcln:]
	u32 := func(b []byte, i uint64) uint64 { return uint64(binary.LittleEndian.Uint32(b[i:])) }
	entries := make([]funcEntry, 0, nfunc)
	for i := range nfunc {
		entry, end, fn := u32(ftab, 8*i), u32(ftab, 8*i+8), u32(ftab, 8*i+4)
		if end < entry || (i > 0 && entry < u32(ftab, 8*i-8)) {
			return nil, 0, 0, false // not sorted: not a function table
		}
		if end == entry {
			continue
		}
		if fn > uint64(len(ftab))-8 {
			return nil, 0, 0, false
		}
		off := u32(ftab, fn+4)
		n := bytes.IndexByte(names[min(off, uint64(len(names))):], 0)
		if off >= uint64(len(names)) || n < 0 {
			return nil, 0, 0, false
		}
		entries = append(entries, funcEntry{addr: textStart + entry, size: uint32(min(end-entry, maxSymSize)), nameOff: uint32(off), nameLen: uint32(n)})
	}
	if len(entries) == 0 || uint64(len(names)) > maxSymSize {
		return nil, 0, 0, false
	}
	last := entries[len(entries)-1]
	return &funcTable{entries: entries[:len(entries):len(entries)], names: string(names)}, entries[0].addr, last.addr + uint64(last.size), true
}

// goTextStart finds runtime.text in a binary without .symtab. Function
// entries in a Go 1.18+ pclntab are offsets from runtime.text, whose address
// is in the pclntab header of a position-dependent binary. In a PIE binary
// that field stays zero; the address is then in the runtime's moduledata,
// filled in by relative relocations whose addends are the link-time
// addresses. Without either, .text's start is right for internally linked
// binaries (externally linked ones start .text with C start-up code).
func goTextStart(f *elf.File, sect *elf.Section, data []byte) uint64 {
	text := f.Section(".text")
	if text == nil {
		return 0
	}
	inText := func(v uint64) bool { return v >= text.Addr && v-text.Addr < text.Size }
	magic := f.ByteOrder.Uint32(data)
	if magic != go118magic && magic != go120magic {
		return text.Addr
	}
	ptrSize := uint64(data[7])
	field := 8 + 2*ptrSize
	if ptrSize != 8 || uint64(len(data)) < field+ptrSize {
		return text.Addr
	}
	if v := f.ByteOrder.Uint64(data[field:]); inText(v) {
		return v
	}
	rel := relativeRelocs(f)
	if v, ok := rel[sect.Addr+field]; ok && inText(v) {
		return v
	}
	// moduledata starts with a pointer to the pclntab header; minpc,
	// maxpc and text follow the header pointer, six slices (three words
	// each) and findfunctab: words 20 to 22, unchanged since Go 1.16.
	const minpcWord, maxpcWord, textWord = 1 + 6*3 + 1, 1 + 6*3 + 2, 1 + 6*3 + 3
	plausible := func(word func(i uint64) (uint64, bool)) (uint64, bool) {
		minpc, ok1 := word(minpcWord)
		maxpc, ok2 := word(maxpcWord)
		t, ok3 := word(textWord)
		return t, ok1 && ok2 && ok3 && inText(t) && t <= minpc && minpc < maxpc
	}
	// PIE: the moduledata's pointers are relocations.
	for off, addend := range rel {
		if addend != sect.Addr {
			continue
		}
		if v, ok := plausible(func(i uint64) (uint64, bool) { v, ok := rel[off+i*ptrSize]; return v, ok }); ok {
			return v
		}
	}
	// Position-dependent: the moduledata's pointers are in the file.
	for _, ds := range f.Sections {
		if ds.Type != elf.SHT_PROGBITS || ds.Flags&elf.SHF_WRITE == 0 || ds.Size > 1<<30 {
			continue
		}
		d, err := ds.Data()
		if err != nil {
			continue
		}
		for off := uint64(0); off+(textWord+1)*ptrSize <= uint64(len(d)); off += ptrSize {
			if f.ByteOrder.Uint64(d[off:]) != sect.Addr {
				continue
			}
			if v, ok := plausible(func(i uint64) (uint64, bool) { return f.ByteOrder.Uint64(d[off+i*ptrSize:]), true }); ok {
				return v
			}
		}
	}
	return text.Addr
}

// relativeRelocs returns the R_X86_64_RELATIVE or R_AARCH64_RELATIVE
// relocations of a 64-bit file: patched address to addend, which is the
// link-time address the patched word points to.
func relativeRelocs(f *elf.File) map[uint64]uint64 {
	if f.Class != elf.ELFCLASS64 {
		return nil
	}
	var relative uint32
	switch f.Machine {
	case elf.EM_X86_64:
		relative = uint32(elf.R_X86_64_RELATIVE)
	case elf.EM_AARCH64:
		relative = uint32(elf.R_AARCH64_RELATIVE)
	default:
		return nil
	}
	rel := map[uint64]uint64{}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		for ; len(data) >= 24; data = data[24:] {
			if elf.R_TYPE64(f.ByteOrder.Uint64(data[8:])) == relative {
				rel[f.ByteOrder.Uint64(data)] = f.ByteOrder.Uint64(data[16:])
			}
		}
	}
	return rel
}

// pltFuncs names the PLT stubs as perf does, "func@plt": the stub for the
// i-th jump-slot relocation of .rela.plt is the i-th entry of .plt.sec
// (when the linker split the PLT for IBT) or of .plt after its header.
// Only x86-64 and arm64 layouts are known; elsewhere it returns nil.
func pltFuncs(f *elf.File) *funcTable {
	var header, entSize uint64
	switch f.Machine {
	case elf.EM_X86_64:
		header, entSize = 16, 16
	case elf.EM_AARCH64:
		header, entSize = 32, 16
	default:
		return nil
	}
	rela := f.Section(".rela.plt")
	if rela == nil || f.Class != elf.ELFCLASS64 {
		return nil
	}
	stubs := f.Section(".plt.sec")
	if stubs != nil {
		header = 0
	} else if stubs = f.Section(".plt"); stubs == nil {
		return nil
	}
	data, err := rela.Data()
	if err != nil {
		return nil
	}
	dynsym, err := f.DynamicSymbols()
	if err != nil {
		return nil
	}
	var funcs []funcSym
	for i := 0; (i+1)*24 <= len(data); i++ {
		info := f.ByteOrder.Uint64(data[i*24+8:])
		symIdx := int(info >> 32)
		// DynamicSymbols leaves out the null symbol at index 0.
		if symIdx < 1 || symIdx > len(dynsym) || dynsym[symIdx-1].Name == "" {
			continue
		}
		addr := stubs.Addr + header + uint64(i)*entSize
		if addr+entSize > stubs.Addr+stubs.Size {
			break
		}
		funcs = append(funcs, funcSym{addr: addr, size: entSize, name: dynsym[symIdx-1].Name + "@plt"})
	}
	return newFuncTable(funcs)
}
