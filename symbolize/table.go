package symbolize

import (
	"sort"
	"strings"
)

// funcTable is an immutable, address-sorted table of function symbols.
// Names live in one shared string so a table with many symbols costs about
// 24 bytes per symbol plus its name, not a string header and allocation each.
type funcTable struct {
	entries []funcEntry
	names   string
}

type funcEntry struct {
	addr    uint64
	size    uint32 // 0: unknown, the symbol extends to the next one
	nameOff uint32
	nameLen uint32
	// aux is free for the table's owner: the kernel keeps the module index
	// here (the struct is padded to 24 bytes anyway).
	aux uint32
}

// funcSym is a symbol while a table is being built.
type funcSym struct {
	addr uint64
	size uint64
	name string
	// rank orders aliases at one address: the lowest wins.
	rank int
	aux  uint32
}

// maxSymSize caps sizes so they fit funcEntry; no real function is larger.
const maxSymSize = 1<<32 - 1

// newFuncTable sorts syms and keeps one symbol per address, the alias with
// the lowest rank (then the shortest, then the first by name, so the result
// does not depend on the input order).
func newFuncTable(syms []funcSym) *funcTable {
	sort.Slice(syms, func(i, j int) bool {
		a, b := syms[i], syms[j]
		if a.addr != b.addr {
			return a.addr < b.addr
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if (a.size == 0) != (b.size == 0) {
			return a.size != 0
		}
		if len(a.name) != len(b.name) {
			return len(a.name) < len(b.name)
		}
		return a.name < b.name
	})
	var names strings.Builder
	entries := make([]funcEntry, 0, len(syms))
	for i, s := range syms {
		if i > 0 && syms[i-1].addr == s.addr {
			continue
		}
		if names.Len()+len(s.name) > maxSymSize {
			break // a 4 GiB name blob means the file is not what it claims
		}
		size := s.size
		if size > maxSymSize {
			size = maxSymSize
		}
		entries = append(entries, funcEntry{
			addr:    s.addr,
			size:    uint32(size),
			nameOff: uint32(names.Len()),
			nameLen: uint32(len(s.name)),
			aux:     s.aux,
		})
		names.WriteString(s.name)
	}
	return &funcTable{entries: entries[:len(entries):len(entries)], names: names.String()}
}

// lookup returns the function containing addr: the symbol at or below addr
// whose [addr, addr+size) holds it, or the nearest one below when its size
// is unknown.
func (t *funcTable) lookup(addr uint64) (string, bool) {
	e, ok := t.find(addr)
	if !ok {
		return "", false
	}
	return t.name(e), true
}

// find is lookup returning the entry itself.
func (t *funcTable) find(addr uint64) (funcEntry, bool) {
	if t == nil {
		return funcEntry{}, false
	}
	// The first entry above addr, by hand: this runs for every frame of
	// every sample, and sort.Search's closure costs a third more.
	lo, hi := 0, len(t.entries)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if t.entries[mid].addr > addr {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	i := lo - 1
	if i < 0 {
		return funcEntry{}, false
	}
	e := t.entries[i]
	if e.size != 0 && addr-e.addr >= uint64(e.size) {
		return funcEntry{}, false
	}
	return e, true
}

func (t *funcTable) name(e funcEntry) string {
	return t.names[e.nameOff : e.nameOff+e.nameLen]
}

func (t *funcTable) len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}
