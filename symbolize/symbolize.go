package symbolize

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/cacheheat/cacheheat/profile"
)

// Module names of frames that are not in a mapped file.
const (
	ModuleUnknown = "[unknown]" // the address is in no executable mapping
	ModuleAnon    = "[anon]"    // an anonymous executable mapping (JIT code)
	ModuleKernel  = "[kernel]"
	ModuleVDSO    = "[vdso]"
)

// Symbolizer resolves user and kernel addresses to function names. It is
// safe for concurrent use.
type Symbolizer struct {
	root string // "/" on a live host; tests may point it elsewhere
	// debugDirs hold separate debug files by build id.
	debugDirs []string

	mu    sync.Mutex
	procs map[int]*process
	// execsFollowed: every exec is reported through Exec before samples
	// taken after it are looked at (FollowExecs).
	execsFollowed bool
	files         map[fileKey]*object
	// unopened remembers mapped files that could not be opened, for Stats.
	unopened map[string]error
	// readers are the objects with a file open to check return
	// addresses (unwind.go).
	readers []*object
	// deferred counts the files opened but not indexed yet (see
	// indexFile); past maxDeferred, files are indexed at once.
	deferred int
	// gen numbers snapshots, so that callers can cache what they resolved
	// until a process's snapshot changes (Generation).
	gen uint64

	vdsoOnce sync.Once
	vdso     *object
	vdsoSize uint64

	kernel kernelSyms
}

// fileKey identifies one version of a file: a binary rebuilt in place gets
// a new mtime or size and is indexed again.
type fileKey struct {
	dev, ino, size uint64
	mtime          syscall.Timespec
}

// process is the snapshot of one process's executable mappings.
type process struct {
	maps []mapping // sorted by start
	// exe identifies the file /proc/PID/exe named at the snapshot: a
	// process that execs another file needs a new snapshot.
	exe fileKey
	gen uint64
	// before are the mappings of the program the process ran before its
	// last exec (Exec), for addresses maps does not cover.
	before []mapping
	// perfMap holds a JIT's symbols from /tmp/perf-PID.map (absolute
	// addresses), nil when it writes none.
	perfMap      *funcTable
	perfMapStamp fileKey
}

// New returns a Symbolizer for the running host.
func New() *Symbolizer { return NewWithRoot("/") }

// NewWithRoot returns a Symbolizer that reads proc and files under root
// instead of "/".
func NewWithRoot(root string) *Symbolizer {
	return &Symbolizer{
		root:      root,
		debugDirs: []string{filepath.Join(root, "usr", "lib", "debug")},
		procs:     make(map[int]*process),
		files:     make(map[fileKey]*object),
		unopened:  make(map[string]error),
	}
}

// maxDeferred bounds the files kept open for deferred indexing.
const maxDeferred = 512

func (s *Symbolizer) procPath(pid int, name ...string) string {
	return filepath.Join(append([]string{s.root, "proc", strconv.Itoa(pid)}, name...)...)
}

// Snapshot reads the executable mappings of pid now and indexes the files
// they map, so User resolves its addresses after it exits. It is cheap when
// the mappings have not changed since the last call, so callers may call it
// for every pid they see in every window. It returns an error wrapping
// os.ErrNotExist when the process is gone (its previous snapshot is kept).
func (s *Symbolizer) Snapshot(pid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked(pid)
}

func (s *Symbolizer) snapshotLocked(pid int) error {
	data, err := os.ReadFile(s.procPath(pid, "maps"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("reading maps of pid %d: %w (%w)", pid, os.ErrNotExist, err)
		}
		return fmt.Errorf("reading maps of pid %d: %w", pid, err)
	}
	maps, err := parseMaps(data)
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	if len(maps) == 0 {
		// An exiting process (zombie) and a kernel thread have no
		// mappings; the last snapshot of the former is what is wanted.
		return fmt.Errorf("pid %d has no executable mappings (exited or kernel thread): %w", pid, os.ErrNotExist)
	}
	old := s.procs[pid]
	p := &process{maps: maps, exe: s.exeKey(pid)}
	if old != nil {
		p.perfMap, p.perfMapStamp = old.perfMap, old.perfMapStamp
	}
	// Both lists are sorted, so unchanged mappings are found by a merge
	// and keep their index without touching the file again.
	j, unchanged := 0, old != nil && len(old.maps) == len(maps)
	anon := false
	for i := range p.maps {
		m := &p.maps[i]
		if old != nil {
			for j < len(old.maps) && old.maps[j].start < m.start {
				j++
			}
			if j < len(old.maps) && old.maps[j].sameAs(m) {
				m.obj = old.maps[j].obj
				continue
			}
		}
		unchanged = false
		switch {
		case m.isFile():
			m.obj = s.objectFor(pid, m)
		case m.module == ModuleVDSO:
			m.obj = s.vdsoFor(m)
		}
	}
	for i := range p.maps {
		anon = anon || isAnon(p.maps[i].module)
	}
	if anon {
		s.readPerfMap(pid, p)
	}
	if unchanged && p.perfMap == old.perfMap && p.exe == old.exe {
		return nil
	}
	s.gen++
	p.gen = s.gen
	s.procs[pid] = p
	return nil
}

// Mapped is one executable mapping as the kernel reported it when it was
// made (perf's PERF_RECORD_MMAP2): its address range, file offset, the
// file's inode and path ("//anon" or "[vdso]" for what is no file).
type Mapped struct {
	Start, Len, Pgoff, Inode uint64
	Path                     string
}

// Map adds a mapping pid made to its snapshot (creating one without
// reading /proc: the process may be gone already), replacing what it
// overlaps, and indexes the file it maps now, while it is still there.
// A process that exits is then resolved with the files it mapped.
func (s *Symbolizer) Map(pid int, mm Mapped) {
	if mm.Len == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[pid]
	if p == nil {
		p = &process{}
		s.procs[pid] = p
	}
	m := mapping{start: mm.Start, end: mm.Start + mm.Len, pgoff: mm.Pgoff, inode: mm.Inode, module: mm.Path}
	switch {
	case mm.Inode == 0 && (mm.Path == "//anon" || mm.Path == ""):
		m.module = ModuleAnon
	case m.isFile():
		m.obj = s.objectFor(pid, &m)
	case m.module == ModuleVDSO:
		m.obj = s.vdsoFor(&m)
	}
	// Keep what the new mapping does not cover: the kernel replaces
	// overlapped ranges (MAP_FIXED), and a mapping split keeps its file
	// offset at each piece's start.
	kept := p.maps[:0:0]
	for _, o := range p.maps {
		if o.end <= m.start || o.start >= m.end {
			kept = append(kept, o)
			continue
		}
		if o.start < m.start {
			left := o
			left.end = m.start
			kept = append(kept, left)
		}
		if o.end > m.end {
			right := o
			right.pgoff += m.end - o.start
			right.start = m.end
			kept = append(kept, right)
		}
	}
	kept = append(kept, m)
	sort.Slice(kept, func(i, j int) bool { return kept[i].start < kept[j].start })
	p.maps = kept
	s.gen++
	p.gen = s.gen
}

// Exec starts pid's mappings afresh: it runs a new program, whose
// mappings Map adds as the kernel reports them. The old program's stay
// behind them for addresses no new mapping covers: a window's samples
// of the process before its exec (a shell's fork of itself) are resolved
// after it.
func (s *Symbolizer) Exec(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &process{}
	if old := s.procs[pid]; old != nil {
		p.perfMap, p.perfMapStamp = old.perfMap, old.perfMapStamp
		p.before = old.maps
	}
	s.gen++
	p.gen = s.gen
	s.procs[pid] = p
}

// Fork gives child its parent's mappings, as a fork does: the kernel
// reports no mapping for them. A parent never seen is read from /proc.
func (s *Symbolizer) Fork(parent, child int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pp := s.procs[parent]
	if pp == nil {
		if err := s.snapshotLocked(parent); err != nil {
			return
		}
		pp = s.procs[parent]
	}
	p := &process{maps: append([]mapping(nil), pp.maps...), exe: pp.exe}
	s.gen++
	p.gen = s.gen
	s.procs[child] = p
}

// exeKey identifies the file a process runs (/proc/PID/exe); zero when it
// cannot be read (a kernel thread, an exited process).
func (s *Symbolizer) exeKey(pid int) fileKey {
	var st syscall.Stat_t
	if err := syscall.Stat(s.procPath(pid, "exe"), &st); err != nil {
		return fileKey{}
	}
	return fileKey{dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim}
}

// NeedsSnapshot says whether pid has no snapshot, or one that may not
// describe it any more: an address in addrs lies in none of its
// executable mappings (a library loaded since, a JIT's new code), or it
// runs another file now (exec; unless execs are followed, FollowExecs).
// Checking costs one stat, where a Snapshot reads and parses the whole
// maps file.
func (s *Symbolizer) NeedsSnapshot(pid int, addrs []uint64) bool {
	s.mu.Lock()
	p, followed := s.procs[pid], s.execsFollowed
	s.mu.Unlock()
	if p == nil {
		return true
	}
	for _, a := range addrs {
		i := sort.Search(len(p.maps), func(i int) bool { return p.maps[i].end > a })
		if i == len(p.maps) || a < p.maps[i].start {
			return true
		}
	}
	return !followed && s.exeKey(pid) != p.exe
}

// FollowExecs says whether the caller reports every exec through Exec
// before it asks about samples taken after it (a mapping watcher that
// lost no record, drained first): NeedsSnapshot then does not stat each
// process's executable to see whether it exec'd, a stat of /proc/PID/exe
// for every sampled process every window.
func (s *Symbolizer) FollowExecs(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.execsFollowed = on
}

// Generation names pid's current snapshot: it changes whenever a Snapshot
// finds the process's mappings changed, so frames resolved under one
// generation may be reused until then. 0: no snapshot.
func (s *Symbolizer) Generation(pid int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.procs[pid]; p != nil {
		return p.gen
	}
	return 0
}

// isAnon reports whether module names anonymous memory, where JITs put
// their code ("[anon:name]" is a mapping named with prctl).
func isAnon(module string) bool {
	return module == ModuleAnon || strings.HasPrefix(module, "[anon:")
}

// Stats describes what a Symbolizer holds, so a recorder can say which
// files' frames could not be named and why.
type Stats struct {
	Processes int // processes with a snapshot
	Files     int // distinct file versions seen
	// Deferred files are not indexed yet: no address in them was resolved.
	Deferred int
	Symbols  int // functions indexed, over all files
	// Problems lists files that could not be opened or parsed, one
	// message each, sorted.
	Problems []string
}

// Stats returns what the Symbolizer holds now.
func (s *Symbolizer) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Processes: len(s.procs), Files: len(s.files), Deferred: s.deferred}
	for _, o := range s.files {
		st.Symbols += o.symbols()
		if o.err != nil {
			st.Problems = append(st.Problems, o.err.Error())
		}
	}
	for _, err := range s.unopened {
		st.Problems = append(st.Problems, err.Error())
	}
	sort.Strings(st.Problems)
	return st
}

// Forget drops pid's mappings; the indexed files stay cached for other
// processes.
func (s *Symbolizer) Forget(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.procs, pid)
}

// User resolves user-space addresses of pid, one frame per address in the
// same order. A pid never snapshotted is snapshotted now if it still runs.
// Addresses are resolved as given (see the package documentation).
func (s *Symbolizer) User(pid int, addrs []uint64) []profile.Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[pid]
	if p == nil {
		_ = s.snapshotLocked(pid) // a process that is gone resolves to [unknown]
		p = s.procs[pid]
	}
	frames := make([]profile.Frame, len(addrs))
	for i, a := range addrs {
		frames[i] = p.frame(a, s.ready)
	}
	return frames
}

// UserStack resolves a user stack of pid, innermost first, as walked by
// frame pointers: User, cut at the first caller that cannot be a return
// address and marked when the kernel's depth limit cut it (unwind.go).
func (s *Symbolizer) UserStack(pid int, addrs []uint64) []profile.Frame {
	frames := s.User(pid, addrs)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkStack(s.procs[pid], addrs, frames)
}

// frame resolves addr; ready indexes a deferred file first.
func (p *process) frame(addr uint64, ready func(*object)) profile.Frame {
	if p == nil {
		return profile.Frame{Module: ModuleUnknown, Offset: addr}
	}
	m := find(p.maps, addr)
	if m == nil {
		m = find(p.before, addr)
	}
	if m == nil {
		return profile.Frame{Module: ModuleUnknown, Offset: addr}
	}
	if !m.isFile() && m.module != ModuleVDSO {
		// Anonymous memory has no file to be relative to; its absolute
		// address is what a JIT's map and a debugger show.
		name, _ := p.perfMap.lookup(addr)
		return profile.Frame{Function: name, Module: m.module, Offset: addr}
	}
	off := addr - m.start + m.pgoff
	ready(m.obj)
	name, _ := m.obj.resolve(off)
	f := profile.Frame{Function: name, Module: m.module, Offset: off}
	if m.obj != nil {
		f.BuildID = m.obj.buildID
	}
	return f
}

// find returns the mapping of maps (sorted) that holds addr, or nil.
func find(maps []mapping, addr uint64) *mapping {
	i := sort.Search(len(maps), func(i int) bool { return maps[i].end > addr })
	if i == len(maps) || addr < maps[i].start {
		return nil
	}
	return &maps[i]
}

// objectFor returns the index of the file mapped by m, from the cache when
// this version of the file was indexed before.
func (s *Symbolizer) objectFor(pid int, m *mapping) *object {
	path := strings.TrimSuffix(m.module, " (deleted)")
	candidates := []struct {
		path       string
		checkInode bool
	}{
		// map_files opens exactly the mapped file, even deleted or
		// replaced, and in another mount namespace.
		{s.procPath(pid, "map_files", fmt.Sprintf("%x-%x", m.start, m.end)), false},
		{s.procPath(pid, "root", path), true},
		{filepath.Join(s.root, path), true},
	}
	var lastErr error
	for _, c := range candidates {
		f, err := os.Open(c.path)
		if err != nil {
			lastErr = err
			continue
		}
		obj, err := s.indexFile(f, m, c.checkInode)
		if obj == nil || obj.file != f {
			f.Close()
		}
		if err != nil {
			lastErr = err
			continue
		}
		return obj
	}
	obj := &object{err: fmt.Errorf("opening %s: %w", m.module, lastErr)}
	s.unopened[m.module] = obj.err
	return obj
}

// errReplaced is returned when the file at a mapping's path is no longer the
// file that was mapped; its symbols would be wrong.
var errReplaced = errors.New("file replaced since it was mapped")

func (s *Symbolizer) indexFile(f *os.File, m *mapping, checkInode bool) (*object, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", m.module, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("stat %s: no inode", m.module)
	}
	if checkInode && st.Ino != m.inode {
		return nil, fmt.Errorf("%s: %w", m.module, errReplaced)
	}
	key := fileKey{dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim}
	if obj, ok := s.files[key]; ok {
		return obj, nil
	}
	// Indexing waits for the first address resolved in the file: of the
	// files a process maps, samples hit few, and parsing the others would
	// be most of a recorder's work. The open file is kept until then, so
	// the process may exit and the file be deleted meanwhile.
	obj := &object{name: m.module, file: f, path: filepath.Join(s.root, strings.TrimSuffix(m.module, " (deleted)")), inode: m.inode}
	s.deferred++
	s.files[key] = obj
	if s.deferred > maxDeferred {
		s.ready(obj)
	}
	return obj, nil
}

// ready indexes o if its indexing was deferred; it closes the file.
func (s *Symbolizer) ready(o *object) {
	if o == nil || o.file == nil {
		return
	}
	loaded, err := loadObject(o.file, s.debugDirs...)
	o.file.Close()
	o.file = nil
	s.deferred--
	if err != nil {
		o.err = fmt.Errorf("%s: %w", o.name, err)
		return
	}
	o.segs, o.tables, o.buildID = loaded.segs, loaded.tables, loaded.buildID
}

// vdsoFor returns the index of the vDSO. The kernel maps one image into
// every process of an ABI, so the recorder reads its own copy once; a
// target whose vDSO differs in size (another ABI) is left unresolved.
func (s *Symbolizer) vdsoFor(m *mapping) *object {
	s.vdsoOnce.Do(func() {
		data, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.HasSuffix(line, " [vdso]") {
				continue
			}
			var start, end uint64
			if _, err := fmt.Sscanf(line, "%x-%x", &start, &end); err != nil || end <= start {
				return
			}
			mem, err := os.Open("/proc/self/mem")
			if err != nil {
				return
			}
			defer mem.Close()
			img := make([]byte, end-start)
			if _, err := mem.ReadAt(img, int64(start)); err != nil {
				return
			}
			obj, err := loadObject(bytes.NewReader(img))
			if err != nil {
				return
			}
			s.vdso, s.vdsoSize = obj, end-start
			return
		}
	})
	if s.vdso == nil || m.end-m.start != s.vdsoSize || m.pgoff != 0 {
		return nil
	}
	return s.vdso
}

// readPerfMap loads /tmp/perf-PID.map, the symbol file JITs (Node.js with
// --perf-basic-prof, Java with perf-map-agent, ...) write for perf, when it
// changed since the last snapshot.
func (s *Symbolizer) readPerfMap(pid int, p *process) {
	f, err := os.Open(s.procPath(pid, "root", "tmp", fmt.Sprintf("perf-%d.map", pid)))
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	stamp := fileKey{dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim}
	if p.perfMap != nil && stamp == p.perfMapStamp {
		return
	}
	var syms []funcSym
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// START SIZE NAME, hex without 0x (some writers add it).
		addrS, rest, ok1 := strings.Cut(sc.Text(), " ")
		sizeS, name, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || name == "" {
			continue
		}
		addr, err1 := strconv.ParseUint(strings.TrimPrefix(addrS, "0x"), 16, 64)
		size, err2 := strconv.ParseUint(strings.TrimPrefix(sizeS, "0x"), 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		// Later lines win: a JIT reuses addresses after freeing code.
		syms = append(syms, funcSym{addr: addr, size: size, name: name, rank: -len(syms)})
	}
	p.perfMap, p.perfMapStamp = newFuncTable(syms), stamp
}
