package collector

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/symbolize"
)

// The kernel reports every executable mapping a process makes and every
// exec, as perf record uses them (PERF_RECORD_MMAP2 and PERF_RECORD_COMM
// of a software dummy event per CPU, read from its ring buffer). The
// recorder follows them as they happen, so that a process that runs for
// 20 ms and exits before its window closes is still symbolized with the
// files it mapped, where /proc/PID/maps read at the window's end finds
// nothing. Processes that ran before the recording started are read from
// /proc when it starts, as perf synthesizes their mappings
// (snapshotRunning), and again at a sample the snapshot does not cover.

// mmapRingPages is each CPU's ring buffer, in pages (a power of two): 256
// KiB holds the mappings of a few hundred process starts, and the watcher
// drains it at least every mmapPoll while records come.
const mmapRingPages = 64

// mmapPoll bounds how long records wait: the kernel wakes the watcher at
// a ring's first record (its wakeup watermark is one byte), the watcher
// drains every ring at once, soon after a process maps its files while
// it (and /proc/PID/map_files) is still there, and then lets a burst of
// process starts gather for mmapPoll before it waits again. A host where
// nothing maps wakes the watcher never: a 20 ms ticker woke it 50 times a
// second and tripled what an idle recorder costs.
const mmapPoll = 20 * time.Millisecond

// snapshotRunning reads the mappings of the processes that keep accepts
// (every one when keep is nil) from /proc, once the watcher is open, as
// perf record synthesizes them at its start: the watcher reports only
// what is mapped from now on, and a process that started before it and
// exits within the first window (a 20 ms program of a loop under -a)
// would otherwise have no mappings when its samples are resolved at the
// window's end, its /proc gone. Newest first (the highest pids, unless
// they wrapped): those are the likeliest to be short-lived.
func snapshotRunning(sym *symbolize.Symbolizer, keep func(pid int) bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return // no /proc: every process is read at its first sample, as before
	}
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self {
			pids = append(pids, pid)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(pids)))
	for _, pid := range pids {
		if keep == nil || keep(pid) {
			_ = sym.Snapshot(pid) // a kernel thread has none; one may have exited
		}
	}
}

// mmapRecord is one mapping, exec or fork the kernel reported.
type mmapRecord struct {
	time uint64
	pid  int
	exec bool // a COMM record of an exec: the mappings before it are gone
	// parent is set on a fork: pid starts with its parent's mappings.
	parent int
	m      symbolize.Mapped
}

// mmapWatcher reads the rings of all CPUs and hands what it reads to the
// symbolizer, for the processes keep accepts.
type mmapWatcher struct {
	rings []*mmapRing
	sym   *symbolize.Symbolizer
	keep  func(pid int) bool
	// byCgroup: the rings carry the target cgroup's records only.
	byCgroup bool
	// epfd waits for any ring's first record, or for wake (an eventfd)
	// to say the watcher stops; -1 when epoll was refused and the
	// watcher polls every mmapPoll instead.
	epfd, wake int

	mu   sync.Mutex // one drain at a time
	lost atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

// newMmapWatcher opens a dummy event on each CPU. A host that refuses it
// (an old kernel, a seccomp profile) records as before: processes are
// read from /proc alone.
//
// With cgroup (a cgroup v2 directory, -G) the events are the kernel's
// records of that cgroup's tasks only (and its descendants': perf matches
// a cgroup event against the task's cgroup ancestry), so a recorder of a
// quiet cgroup on a busy host is not woken, and does not read
// /proc/PID/cgroup (keep), for every process started elsewhere. A kernel
// that refuses a cgroup event there (the perf_event controller bound to a
// cgroup v1 hierarchy) gets events of every task, filtered by keep.
func newMmapWatcher(cpus []int, sym *symbolize.Symbolizer, keep func(pid int) bool, cgroup string) (*mmapWatcher, error) {
	w := &mmapWatcher{sym: sym, keep: keep, epfd: -1, wake: -1, stop: make(chan struct{}), done: make(chan struct{})}
	cgfd := -1
	if cgroup != "" {
		if fd, err := unix.Open(cgroup, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			cgfd = fd
			defer unix.Close(fd) // the events hold the cgroup once open
		}
	}
	for i, cpu := range cpus {
		r, err := openMmapRing(cpu, cgfd)
		if err != nil && i == 0 && cgfd >= 0 {
			cgfd = -1
			r, err = openMmapRing(cpu, cgfd)
		}
		if err != nil {
			w.closeRings()
			return nil, err
		}
		w.rings = append(w.rings, r)
	}
	w.byCgroup = cgfd >= 0
	w.openEpoll()
	return w, nil
}

// openEpoll sets up the wait for the rings' records; on failure the
// watcher polls.
func (w *mmapWatcher) openEpoll() {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return
	}
	for _, fd := range append(w.ringFDs(), wake) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			unix.Close(wake)
			return
		}
	}
	w.epfd, w.wake = epfd, wake
}

func (w *mmapWatcher) ringFDs() []int {
	fds := make([]int, len(w.rings))
	for i, r := range w.rings {
		fds[i] = r.fd
	}
	return fds
}

// start drains the rings as records come (or every mmapPoll without
// epoll) until close.
func (w *mmapWatcher) start() {
	go func() {
		defer close(w.done)
		// A timer, not a ticker: nothing wakes the process while the
		// watcher sleeps in epoll.
		pause := time.NewTimer(mmapPoll)
		defer pause.Stop()
		events := make([]unix.EpollEvent, len(w.rings)+1)
		for {
			if w.epfd >= 0 {
				// Blocks the goroutine's thread until a ring has a
				// record or close writes wake.
				if _, err := unix.EpollWait(w.epfd, events, -1); err != nil && err != unix.EINTR {
					unix.Close(w.epfd) // polls from here on
					w.epfd = -1
				}
			}
			select {
			case <-w.stop:
				return
			default:
			}
			w.drain()
			pause.Reset(mmapPoll)
			select {
			case <-w.stop:
				return
			case <-pause.C:
			}
		}
	}()
}

// drain reads every ring, orders the records by time (a process moves
// between CPUs, and its exec must come before the mappings that follow
// it) and applies them.
func (w *mmapWatcher) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	var recs []mmapRecord
	for _, r := range w.rings {
		var lost uint64
		recs, lost = r.read(recs)
		w.lost.Add(lost)
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].time < recs[j].time })
	for _, rec := range recs {
		if w.keep != nil && !w.keep(rec.pid) {
			continue
		}
		switch {
		case rec.exec:
			w.sym.Exec(rec.pid)
		case rec.parent != 0:
			w.sym.Fork(rec.parent, rec.pid)
		default:
			w.sym.Map(rec.pid, rec.m)
		}
	}
}

// close stops the watcher after a last drain and releases the rings.
func (w *mmapWatcher) close() {
	if w == nil {
		return
	}
	select {
	case <-w.stop:
	default:
		close(w.stop)
		if w.wake >= 0 {
			var one [8]byte
			one[0] = 1 // an eventfd counter of 1, in host (little-endian) order
			_, _ = unix.Write(w.wake, one[:])
		}
		<-w.done
	}
	w.drain()
	w.closeRings()
}

func (w *mmapWatcher) closeRings() {
	if w.epfd >= 0 {
		unix.Close(w.epfd)
		w.epfd = -1
	}
	if w.wake >= 0 {
		unix.Close(w.wake)
		w.wake = -1
	}
	for _, r := range w.rings {
		r.close()
	}
	w.rings = nil
}

// mmapRing is one CPU's dummy event and its ring buffer.
type mmapRing struct {
	fd   int
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
}

func openMmapRing(cpu, cgroupFD int) (*mmapRing, error) {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      unix.PERF_COUNT_SW_DUMMY,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample_type: unix.PERF_SAMPLE_TIME,
		// Executable mappings only (no mmap_data), with the file's
		// identity (mmap2), execs (comm, comm_exec), forks (task: a
		// child runs in its parent's mappings until it execs), and each
		// record's time (sample_id_all) to order the CPUs' records.
		Bits: unix.PerfBitMmap | unix.PerfBitMmap2 | unix.PerfBitComm | unix.PerfBitCommExec | unix.PerfBitTask | unix.PerfBitSampleIDAll |
			unix.PerfBitWatermark,
		// Wake a poller at the first byte (wakeup_watermark): the
		// watcher sleeps in epoll until a record comes (mmapPoll).
		Wakeup: 1,
	}
	pid, flags := -1, unix.PERF_FLAG_FD_CLOEXEC
	if cgroupFD >= 0 {
		pid, flags = cgroupFD, flags|unix.PERF_FLAG_PID_CGROUP
	}
	fd, err := unix.PerfEventOpen(&attr, pid, cpu, -1, flags)
	if err != nil {
		return nil, fmt.Errorf("opening the mapping events on cpu %d: %w", cpu, err)
	}
	page := os.Getpagesize()
	mem, err := unix.Mmap(fd, 0, (1+mmapRingPages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mapping the ring buffer of cpu %d: %w", cpu, err)
	}
	r := &mmapRing{fd: fd, mem: mem, meta: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))}
	off, size := r.meta.Data_offset, r.meta.Data_size
	if off == 0 || size == 0 { // kernels before 4.1 leave them 0
		off, size = uint64(page), uint64(mmapRingPages*page)
	}
	r.data = mem[off : off+size]
	return r, nil
}

// read appends the ring's records to recs and frees their space; lost is
// what the kernel dropped because the ring was full.
func (r *mmapRing) read(recs []mmapRecord) (_ []mmapRecord, lost uint64) {
	head := atomic.LoadUint64(&r.meta.Data_head)
	tail := atomic.LoadUint64(&r.meta.Data_tail)
	size := uint64(len(r.data))
	var hdr [8]byte
	for tail+8 <= head {
		r.copyAt(hdr[:], tail)
		typ := binary.LittleEndian.Uint32(hdr[0:])
		misc := binary.LittleEndian.Uint16(hdr[4:])
		n := uint64(binary.LittleEndian.Uint16(hdr[6:]))
		if n < 8 || tail+n > head || n > size {
			break // torn or corrupt: drop the rest
		}
		body := make([]byte, n-8)
		r.copyAt(body, tail+8)
		tail += n
		switch typ {
		case unix.PERF_RECORD_MMAP2:
			if rec, ok := parseMmap2(body); ok {
				recs = append(recs, rec)
			}
		case unix.PERF_RECORD_COMM:
			if misc&unix.PERF_RECORD_MISC_COMM_EXEC != 0 && len(body) >= 16 {
				recs = append(recs, mmapRecord{pid: int(binary.LittleEndian.Uint32(body)), exec: true,
					time: binary.LittleEndian.Uint64(body[len(body)-8:])})
			}
		case unix.PERF_RECORD_FORK:
			// pid, ppid, tid, ptid, time; a new thread (pid = ppid)
			// shares its process's mappings.
			if len(body) >= 24 {
				pid, ppid := binary.LittleEndian.Uint32(body), binary.LittleEndian.Uint32(body[4:])
				if pid != ppid && ppid != 0 {
					recs = append(recs, mmapRecord{pid: int(pid), parent: int(ppid), time: binary.LittleEndian.Uint64(body[16:])})
				}
			}
		case unix.PERF_RECORD_LOST:
			if len(body) >= 16 {
				lost += binary.LittleEndian.Uint64(body[8:])
			}
		}
	}
	atomic.StoreUint64(&r.meta.Data_tail, tail)
	return recs, lost
}

// copyAt copies from the ring at position pos, wrapping around its end.
func (r *mmapRing) copyAt(dst []byte, pos uint64) {
	size := uint64(len(r.data))
	start := pos % size
	n := copy(dst, r.data[start:])
	if n < len(dst) {
		copy(dst[n:], r.data)
	}
}

func (r *mmapRing) close() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// parseMmap2 reads a PERF_RECORD_MMAP2 body: pid, tid, addr, len, pgoff,
// maj, min, ino, ino_generation, prot, flags, the file name (NUL padded
// to 8 bytes), then sample_id's time.
func parseMmap2(b []byte) (mmapRecord, bool) {
	const fixed = 4 + 4 + 8 + 8 + 8 + 4 + 4 + 8 + 8 + 4 + 4
	if len(b) < fixed+8 {
		return mmapRecord{}, false
	}
	le := binary.LittleEndian
	rec := mmapRecord{pid: int(le.Uint32(b[0:]))}
	rec.m.Start = le.Uint64(b[8:])
	rec.m.Len = le.Uint64(b[16:])
	rec.m.Pgoff = le.Uint64(b[24:])
	rec.m.Inode = le.Uint64(b[40:])
	prot := le.Uint32(b[56:])
	name := b[fixed : len(b)-8]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	rec.m.Path = string(name)
	rec.time = le.Uint64(b[len(b)-8:])
	if prot&unix.PROT_EXEC == 0 {
		return mmapRecord{}, false
	}
	return rec, true
}
