package collector

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/profile"
)

// Sizes and cookie bits of bpf/funclat.h.
const (
	funcMax     = int(bpf.FunclatFuncSizeFUNC_MAX)
	funcBuckets = int(bpf.FunclatFuncSizeFUNC_BUCKETS)
	cookieGo    = uint64(1) << bpf.FunclatCookieBitsCOOKIE_GO_SHIFT
)

// FuncEventsPerWindow caps the per-call events (--func-events) kept in one
// window; the rest are counted as dropped.
const FuncEventsPerWindow = 10000

// DefaultFuncInflight bounds the calls in flight at once (all functions,
// threads and goroutines together).
const DefaultFuncInflight = 16384

// funcConfig is what the function probes need.
type funcConfig struct {
	specs       []FuncSpec
	target      Target
	pids        []int // probe filter; empty: every process
	cgroupID    uint64
	cgroupLevel uint32
	events      bool
	inflight    uint32
	hwReason    string // why no hardware event is counted per call
}

// funcKernel holds the function probes' programs, maps and links.
type funcKernel struct {
	objs    bpf.FunclatObjects
	links   []link.Link
	probes  []*funcProbe
	rd      *ringbuf.Reader
	wg      sync.WaitGroup
	flushed chan struct{} // the reader drained the ring buffer after a Flush
	// startMono is the recording's start on the kernel's monotonic clock,
	// set once the recording starts.
	startMono atomic.Int64

	mu      sync.Mutex
	pending map[int][]profile.FunctionCall
	over    map[int]uint64 // events over the window cap
}

// funcSnap is the cumulative function state read at a window's end.
type funcSnap struct {
	buckets [][]bpf.FunclatFuncBucket // [func][bucket], summed over CPUs
	stats   []bpf.FunclatFuncStats
}

// openFuncs resolves the functions, loads the programs and attaches the
// probes: returns first, so a call entered before its return probe exists
// cannot leave an entry behind.
func openFuncs(cfg funcConfig) (_ *funcKernel, err error) {
	if len(cfg.specs) > funcMax {
		return nil, fmt.Errorf("%w: %d --func functions, at most %d", ErrNoTarget, len(cfg.specs), funcMax)
	}
	fk := &funcKernel{pending: map[int][]profile.FunctionCall{}, over: map[int]uint64{}, flushed: make(chan struct{})}
	if fk.probes, err = resolveFuncs(cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			fk.close()
		}
	}()
	if err := fk.load(cfg); err != nil {
		return nil, err
	}
	pids := cfg.pids
	if len(pids) == 0 {
		pids = []int{0} // every process
	}
	for _, p := range fk.probes {
		if err := fk.attach(p, pids); err != nil {
			return nil, err
		}
	}
	if cfg.events {
		if fk.rd, err = ringbuf.NewReader(fk.objs.FuncEvents); err != nil {
			return nil, fmt.Errorf("opening the per-call event ring buffer: %w", err)
		}
		fk.wg.Add(1)
		go fk.readEvents()
	}
	return fk, nil
}

// resolveFuncs finds each function's binary, entry and returns; a spec
// without a binary names one in the target's main executable.
func resolveFuncs(cfg funcConfig) ([]*funcProbe, error) {
	var mainExe string
	for _, s := range cfg.specs {
		if s.Path == "" {
			var err error
			if mainExe, err = mainExecutable(cfg.target); err != nil {
				return nil, err
			}
			break
		}
	}
	var probes []*funcProbe
	for i, s := range cfg.specs {
		p, err := resolveFunc(i, s, mainExe)
		if err != nil {
			return nil, err
		}
		p.spec.HardwareEvents = cfg.hwReason
		probes = append(probes, p)
	}
	return probes, nil
}

// load sets the function probes' constants and loads their programs and
// maps into the kernel.
func (fk *funcKernel) load(cfg funcConfig) error {
	spec, err := bpf.LoadFunclat()
	if err != nil {
		return fmt.Errorf("loading the function probes' bpf spec: %w", err)
	}
	for name, v := range map[string]any{
		"target_cgroup":       cfg.cgroupID,
		"target_cgroup_level": cfg.cgroupLevel,
		"events_on":           cfg.events,
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("setting bpf variable %s: %w", name, err)
		}
	}
	if cfg.inflight == 0 {
		cfg.inflight = DefaultFuncInflight
	}
	spec.Maps["inflight"].MaxEntries = cfg.inflight
	if err := spec.LoadAndAssign(&fk.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("%w: the kernel's verifier refused the function probes: %v", ErrHost, ve)
		}
		return fmt.Errorf("%w: loading the function probes: %w", ErrHost, err)
	}
	return nil
}

// attach attaches one function's probes for each of pids (0: every
// process): its returns first (a uretprobe for C, a uprobe on each RET
// for Go, whose stacks move), then its entry.
func (fk *funcKernel) attach(p *funcProbe, pids []int) error {
	ex, err := link.OpenExecutable(p.spec.Binary)
	if err != nil {
		return fmt.Errorf("%w: --func %s: %w", ErrNoTarget, p.symbol, err)
	}
	for _, pid := range pids {
		cookie := uint64(p.spec.ID)
		var l link.Link
		if p.spec.Lang == profile.LangGo {
			cookie |= cookieGo
			for _, off := range p.rets {
				if l, err = ex.Uprobe(p.symbol, fk.objs.FuncRetInsn, &link.UprobeOptions{Offset: off, PID: pid, Cookie: cookie}); err != nil {
					return fmt.Errorf("%w: attaching to the RET at %s+%#x: %w", ErrHost, p.symbol, off, err)
				}
				fk.links = append(fk.links, l)
			}
		} else {
			if l, err = ex.Uretprobe(p.symbol, fk.objs.FuncReturn, &link.UprobeOptions{PID: pid, Cookie: cookie}); err != nil {
				return fmt.Errorf("%w: attaching a uretprobe to %s: %w", ErrHost, p.symbol, err)
			}
			fk.links = append(fk.links, l)
		}
		if l, err = ex.Uprobe(p.symbol, fk.objs.FuncEntry, &link.UprobeOptions{Offset: p.entry, PID: pid, Cookie: cookie}); err != nil {
			return fmt.Errorf("%w: attaching a uprobe to %s: %w", ErrHost, p.symbol, err)
		}
		fk.links = append(fk.links, l)
	}
	return nil
}

// specs are the functions for the header.
func (fk *funcKernel) specs() []profile.FunctionSpec {
	var out []profile.FunctionSpec
	for _, p := range fk.probes {
		out = append(out, p.spec)
	}
	return out
}

// readEvents moves per-call events into the pending window until the
// reader is closed.
func (fk *funcKernel) readEvents() {
	defer fk.wg.Done()
	var e bpf.FunclatFuncEvent
	for {
		rec, err := fk.rd.Read()
		if errors.Is(err, ringbuf.ErrFlushed) {
			fk.flushed <- struct{}{}
			continue
		}
		if err != nil {
			return // closed
		}
		if len(rec.RawSample) < int(unsafe.Sizeof(e)) {
			continue
		}
		e = *(*bpf.FunclatFuncEvent)(unsafe.Pointer(&rec.RawSample[0]))
		id := int(e.Func)
		c := profile.FunctionCall{PID: int(e.Pid), TID: int(e.Tid), StartNS: int64(e.StartNs) - fk.startMono.Load(), LatencyNS: e.LatNs, Moved: e.Moved != 0}
		if !c.Moved {
			c.Deltas = append([]uint64(nil), e.Delta[:]...)
		}
		fk.mu.Lock()
		if len(fk.pending[id]) < FuncEventsPerWindow {
			fk.pending[id] = append(fk.pending[id], c)
		} else {
			fk.over[id]++
		}
		fk.mu.Unlock()
	}
}

// zeroSnap is the state at load: every count zero.
func (fk *funcKernel) zeroSnap() *funcSnap {
	s := &funcSnap{buckets: make([][]bpf.FunclatFuncBucket, len(fk.probes)), stats: make([]bpf.FunclatFuncStats, len(fk.probes))}
	for f := range s.buckets {
		s.buckets[f] = make([]bpf.FunclatFuncBucket, funcBuckets)
	}
	return s
}

// snapshot reads the cumulative per-bucket sums and per-function stats.
func (fk *funcKernel) snapshot() (*funcSnap, error) {
	s := &funcSnap{buckets: make([][]bpf.FunclatFuncBucket, len(fk.probes)), stats: make([]bpf.FunclatFuncStats, len(fk.probes))}
	var per []bpf.FunclatFuncBucket
	for f := range fk.probes {
		s.buckets[f] = make([]bpf.FunclatFuncBucket, funcBuckets)
		for b := 0; b < funcBuckets; b++ {
			if err := fk.objs.FuncHist.Lookup(uint32(f*funcBuckets+b), &per); err != nil {
				return nil, fmt.Errorf("reading function histogram: %w", err)
			}
			t := &s.buckets[f][b]
			for _, v := range per {
				t.Calls += v.Calls
				t.Counted += v.Counted
				t.LatNs += v.LatNs
				for i := range t.Sum {
					t.Sum[i] += v.Sum[i]
				}
			}
		}
		var st []bpf.FunclatFuncStats
		if err := fk.objs.FuncStatMap.Lookup(uint32(f), &st); err != nil {
			return nil, fmt.Errorf("reading function stats: %w", err)
		}
		t := &s.stats[f]
		for _, v := range st {
			t.Entries += v.Entries
			t.Returns += v.Returns
			t.Unmatched += v.Unmatched
			t.Abandoned += v.Abandoned
			t.Moved += v.Moved
			t.EvDropped += v.EvDropped
			t.InflightFull += v.InflightFull
		}
	}
	return s, nil
}

// window turns two snapshots into the window's functions and takes the
// per-call events of calls that returned by endNS (since the recording's
// start); later ones wait for the next window.
func (fk *funcKernel) window(prev, cur *funcSnap, endNS int64) []profile.FunctionWindow {
	// Every event already in the ring buffer belongs to this window:
	// the reader drains them before the window takes its calls, so the
	// last window of a recording gets the last calls.
	if fk.rd != nil && fk.rd.Flush() == nil {
		<-fk.flushed
	}
	fk.mu.Lock()
	pending, over := fk.pending, fk.over
	fk.pending, fk.over = map[int][]profile.FunctionCall{}, map[int]uint64{}
	for id, calls := range pending {
		keep := calls[:0]
		for _, c := range calls {
			if c.StartNS+int64(c.LatencyNS) > endNS {
				fk.pending[id] = append(fk.pending[id], c)
			} else {
				keep = append(keep, c)
			}
		}
		pending[id] = keep
	}
	fk.mu.Unlock()
	var out []profile.FunctionWindow
	for f := range fk.probes {
		ps, cs := prev.stats[f], cur.stats[f]
		fw := profile.FunctionWindow{
			ID:            f,
			Entries:       cs.Entries - ps.Entries,
			Unmatched:     cs.Unmatched - ps.Unmatched,
			Abandoned:     cs.Abandoned - ps.Abandoned,
			Moved:         cs.Moved - ps.Moved,
			InflightFull:  cs.InflightFull - ps.InflightFull,
			EventsDropped: cs.EvDropped - ps.EvDropped + over[f],
			Calls:         pending[f],
		}
		for b := 0; b < funcBuckets; b++ {
			p, c := prev.buckets[f][b], cur.buckets[f][b]
			if c.Calls == p.Calls {
				continue
			}
			fb := profile.FunctionBucket{Bucket: b, Calls: c.Calls - p.Calls, Counted: c.Counted - p.Counted, LatencyNS: c.LatNs - p.LatNs, Sums: make([]uint64, len(c.Sum))}
			for i := range c.Sum {
				fb.Sums[i] = c.Sum[i] - p.Sum[i]
			}
			fw.Buckets = append(fw.Buckets, fb)
		}
		out = append(out, fw)
	}
	return out
}

// close detaches the probes first, then stops the event reader and frees
// the maps.
func (fk *funcKernel) close() error {
	var errs []error
	for _, l := range fk.links {
		errs = append(errs, l.Close())
	}
	fk.links = nil
	if fk.rd != nil {
		errs = append(errs, fk.rd.Close())
		fk.wg.Wait()
		fk.rd = nil
	}
	errs = append(errs, fk.objs.Close())
	return errors.Join(errs...)
}

// funcHardwareReason says why calls get no hardware event counts.
func funcHardwareReason(mode string) string {
	if mode != "hardware" {
		return "not counted: this host has no hardware PMU (software mode), so calls carry the kernel's task counters only"
	}
	return "not counted: per-call hardware counts are not implemented; the recording's per-thread event counts cover the same threads"
}
