package collector

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/profile"
)

// Reading the kernel side's maps into a snapshot each window: tasks,
// counters, histograms, statistics, waits and their peers, and the other
// processes; and the batch readers they share.

// snapshot reads every cumulative value: the seam between the kernel and
// the window arithmetic (window.go). A CPU whose software counts the BPF
// side can tell is not read (readCounters) unless every is set: a
// recording's last window reads every CPU's.
func (k *kernel) snapshot(every bool) (*snapshot, error) {
	s := &snapshot{}
	var err error
	// The stats first: they say whether the task map can have changed.
	if err := k.readStats(s); err != nil {
		return nil, err
	}
	if s.tasks, err = k.readTasks(s.taskWrites); err != nil {
		return nil, err
	}
	if s.target, err = k.readTargetTotals(); err != nil {
		return nil, err
	}
	// Each CPU's busy time and switch counts before its counters: they
	// say which CPUs need reading.
	if err := k.readBusy(s); err != nil {
		return nil, err
	}
	if s.host, err = k.readCounters(s, every); err != nil {
		return nil, err
	}
	if k.cfg.byCgroup {
		if err := k.snapshotCgroups(s); err != nil {
			return nil, err
		}
	}
	if err := k.readHists(s); err != nil {
		return nil, err
	}
	if !k.cfg.byCgroup {
		if s.waits, err = k.readWaits(s.offcpu); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// readWaits reads the target's cumulative off-CPU time by wait code,
// summed over CPUs. The map holds the few codes the target blocked with,
// and never shrinks. Every update of it (and of peers) is counted in the
// off-CPU histogram right after it (wait_in in bpf/cacheheat.c), so while
// that histogram's count (offcpu, just read) stands still, nothing is
// walked: the last walk's values stand. A walk visits every bucket of
// the hash, so a recorder of idle targets skipped it only this way.
func (k *kernel) readWaits(offcpu [][]uint64) (map[uint32]waitVal, error) {
	var ins uint64
	for _, h := range offcpu {
		for _, n := range h {
			ins += n
		}
	}
	k.waitIns = ins
	if k.waits != nil && ins == k.waitsAt {
		return k.waits, nil
	}
	codes, vals, err := k.waitBuf.readAll(k.objs.Waits)
	if err != nil {
		return nil, fmt.Errorf("reading the wait map: %w", err)
	}
	out := make(map[uint32]waitVal, len(codes))
	perKey := len(vals) / max(1, len(codes))
	for i, code := range codes {
		w := waitVal{hist: make([]uint64, len(vals[0].Hist))}
		for _, v := range vals[i*perKey : (i+1)*perKey] {
			w.ns += v.Ns
			w.count += v.Count
			for b, n := range v.Hist {
				w.hist[b] += n
			}
		}
		out[code] = w
	}
	k.waits, k.waitsAt = out, ins
	return out, nil
}

// drainPeers takes the target's waits on other processes since the last
// drain, by the process that woke it, longest first.
//
// Like the waits, the map is walked only when a wait ended since the
// last drain emptied it (see readWaits).
func (k *kernel) drainPeers() []profile.Peer {
	if k.waitIns == k.peersAt {
		return nil
	}
	k.peersAt = k.waitIns
	var key bpf.CacheheatPeerKey
	var v bpf.CacheheatPeerVal
	var keys []bpf.CacheheatPeerKey
	it := k.objs.Peers.Iterate()
	for it.Next(&key, &v) {
		keys = append(keys, key)
	}
	var out []profile.Peer
	for _, key := range keys {
		if err := k.objs.Peers.LookupAndDelete(&key, &v); err != nil {
			continue
		}
		reason, call, _ := waitOf(key.Wait)
		out = append(out, profile.Peer{
			PID: int(key.Tgid), WakerPID: int(key.WakerTgid), WakerComm: cString(key.WakerComm[:]),
			Reason: reason, Call: call, NS: v.Ns, Count: v.Count,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NS != out[j].NS {
			return out[i].NS > out[j].NS
		}
		return out[i].WakerPID < out[j].WakerPID
	})
	// The longest waits say on whom; the tail would grow every window.
	if len(out) > maxPeers {
		out = out[:maxPeers]
	}
	return out
}

// maxPeers is how many waker entries a window lists.
const maxPeers = 20

// readTasks reads every thread's counts, and prunes the records of the
// threads that exited. Walking the map visits all its buckets, which
// costs even when it is empty; so while no task record was written since
// the last walk (stats task_writes, read just before: the BPF side counts
// each write after making it), the last walk's records stand.
func (k *kernel) readTasks(writes uint64) (map[taskKey]taskVal, error) {
	if k.tasks != nil && writes == k.tasksWrites {
		return k.tasks, nil
	}
	keys, vals, err := k.taskBuf.readAll(k.objs.Tasks)
	if err != nil {
		return nil, fmt.Errorf("reading the task map: %w", err)
	}
	tasks := make(map[taskKey]taskVal, len(keys))
	var exited []bpf.CacheheatTaskKey
	for i, key := range keys {
		tv := taskVal{comm: cString(vals[i].Comm[:]), counts: append([]uint64(nil), vals[i].Counts[:]...)}
		tasks[taskKey{tgid: int(key.Tgid), tid: int(key.Pid)}] = tv
		if vals[i].Exited != 0 {
			exited = append(exited, key)
		}
	}
	pruned := k.exited // marked at the last walk: deleted now
	k.prune(exited)
	// What a skipped walk returns: these records, less those just deleted.
	k.tasks, k.tasksWrites = tasks, writes
	if len(pruned) > 0 {
		k.tasks = maps.Clone(tasks)
		for _, key := range pruned {
			delete(k.tasks, taskKey{tgid: int(key.Tgid), tid: int(key.Pid)})
		}
	}
	return tasks, nil
}

// readTargetTotals reads what the targets counted, [slot][cpu].
func (k *kernel) readTargetTotals() ([][]uint64, error) {
	tots, err := k.totalsBuf.read(k.objs.TargetTotals)
	if err != nil {
		return nil, fmt.Errorf("reading target totals: %w", err)
	}
	target := make([][]uint64, len(k.cfg.counted))
	for slot := range k.cfg.counted {
		target[slot] = make([]uint64, len(tots))
		for cpu, t := range tots {
			target[slot][cpu] = t.Counts[slot]
		}
	}
	return target, nil
}

// counterGroup lists the slots of one CPU's group of software counters;
// tellable: the BPF side's counts can stand in for its reads
// (exactCounts), and every member is an event they tell (tellable).
type counterGroup struct {
	slots    []int
	tellable bool
	// inPlace is, per member, its index in the BPF side's host_faults
	// (struct last_val) for a fault slot, -1 for any other; nil when a
	// fault slot has none there (more fault slots than HOST_FAULTS), so
	// the group's faults are never taken from the sampler's reads.
	inPlace []int
}

// inPlaceOf is a group's inPlace for its slots, given the fault slots
// (bit i: slot i) the sampler reads in slot order.
func inPlaceOf(slots []int, faultSlots uint64) []int {
	out := make([]int, len(slots))
	for j, slot := range slots {
		out[j] = -1
		if faultSlots&(1<<slot) == 0 {
			continue
		}
		out[j] = bits.OnesCount64(faultSlots & (1<<slot - 1))
		if out[j] >= int(bpf.CacheheatSizesHOST_FAULTS) {
			return nil
		}
	}
	return out
}

// tellable says whether the BPF side's counts can stand in for a read of
// software event ev between two reads: it counts switches and
// migrations as perf does and sees every fault a task's counters show;
// cpu-clock's per-CPU value comes from the busy time. Not task-clock,
// say, which moves with time.
func tellable(ev Event) bool {
	if ev.Type != unix.PERF_TYPE_SOFTWARE || ev.StandIn != nil {
		return false
	}
	switch ev.Config {
	case unix.PERF_COUNT_SW_CPU_CLOCK, unix.PERF_COUNT_SW_CONTEXT_SWITCHES, unix.PERF_COUNT_SW_CPU_MIGRATIONS,
		unix.PERF_COUNT_SW_PAGE_FAULTS, unix.PERF_COUNT_SW_PAGE_FAULTS_MIN, unix.PERF_COUNT_SW_PAGE_FAULTS_MAJ:
		return true
	}
	return false
}

// readCounters reads what every task counted, [slot][cpu], from the perf
// counters: each CPU's software group at once, the others one by one.
//
// Reading a counter of another CPU interrupts it (an IPI; on a guest, an
// exit from its halt): 16-25 us of the reader's time on the 2-CPU VM
// against 1.5-3.5 us for its own CPU's (bench/groupread), and on the
// 16-CPU machine over a third of an idle recorder's time (BENCHMARKS.md,
// "Tenth session"), besides waking each idle CPU. So a CPU's software
// group is read only when its page faults moved since its last read and
// since the cpu-clock sampler last read them on the CPU itself (or the
// BPF side cannot tell: counterGroup.tellable): context switches and
// migrations are what the BPF side counts at each switch as perf does
// (struct last_val, counting the switches the tracepoint does not show
// when it next notes the CPU; perf can be a switch or a migration ahead
// until then, which the next read levels), added to the last read's
// values; page faults are the sampler's in-place read when it came after
// the last fault noted there (readInPlace), or stand; cpu-clock (whose
// per-CPU value a window takes from the busy time) stands. A fault the
// task counters do not show (one that failed) shows at the CPU's next
// read; the recording's last window reads every CPU. Hardware counters
// count interrupts on an idle CPU too, and are always read.
func (k *kernel) readCounters(s *snapshot, every bool) ([][]counterValue, error) {
	host := make([][]counterValue, len(k.cfg.counted))
	for slot := range host {
		host[slot] = make([]counterValue, k.possible)
	}
	var fresh []int
	for i, g := range k.groups {
		if len(g.slots) == 0 {
			continue
		}
		cpu := k.counters[g.slots[0]][i].cpu
		r := &k.reads[i]
		if now := at(s.sw, cpu); !every && g.tellable {
			if !r.tells(now) {
				r.readInPlace(g.inPlace, now)
			}
			if r.tells(now) {
				for j, slot := range g.slots {
					host[slot][cpu] = r.show(j, r.told(k.cfg.counted[slot], j, now))
				}
				continue
			}
		}
		vals := make([]counterValue, len(g.slots))
		if err := k.counters[g.slots[0]][i].readGroup(vals); err != nil {
			return nil, err
		}
		if g.tellable {
			r.vals, r.before = vals, at(s.sw, cpu)
			fresh = append(fresh, i)
		}
		for j, slot := range g.slots {
			host[slot][cpu] = vals[j]
			if g.tellable {
				host[slot][cpu] = r.show(j, vals[j])
			}
		}
	}
	if len(fresh) > 0 {
		// What the BPF side had counted by the end of the reads: the base
		// the next windows' switch counts are added from. Switches between
		// a read and this are in neither, and show at the next read.
		last, err := k.lastBuf.read(k.objs.Last)
		if err != nil {
			return nil, fmt.Errorf("reading per-cpu state: %w", err)
		}
		for _, i := range fresh {
			k.reads[i].after = cpuSWOf(at(last, k.counters[k.groups[i].slots[0]][i].cpu))
		}
	}
	for slot, ev := range k.cfg.counted {
		if ev.Kind == KindSoftware {
			continue // read with its group
		}
		for _, pc := range k.counters[slot] {
			v, err := pc.read()
			if err != nil {
				return nil, err
			}
			host[slot][pc.cpu] = v
		}
	}
	// A rotated stand-in's own enabled clock stops while it is out of
	// turn; the reference slot's is the time it was meant to count.
	for _, slot := range k.cfg.rotated {
		for cpu := range host[slot] {
			host[slot][cpu].Enabled = host[k.cfg.refSlot][cpu].Enabled
		}
	}
	return host, nil
}

// readHists reads the run-queue latency and off-CPU histograms, per CPU.
func (k *kernel) readHists(s *snapshot) error {
	hs, err := k.histsBuf.read(k.objs.Hists)
	if err != nil {
		return fmt.Errorf("reading histograms: %w", err)
	}
	s.runq = make([][]uint64, len(hs))
	s.offcpu = make([][]uint64, len(hs))
	for cpu, h := range hs {
		s.runq[cpu] = append([]uint64(nil), h.Runq[:]...)
		s.offcpu[cpu] = append([]uint64(nil), h.Offcpu[:]...)
	}
	return nil
}

// readStats reads the BPF side's own per-CPU statistics: sampler fires,
// what it dropped, and the off-CPU totals.
func (k *kernel) readStats(s *snapshot) error {
	st, err := k.statsBuf.read(k.objs.Stats)
	if err != nil {
		return fmt.Errorf("reading bpf stats: %w", err)
	}
	s.stats = make([]statsVal, len(st))
	for cpu, v := range st {
		// fires: readBusy (struct last_val).
		s.stats[cpu] = statsVal{
			samples:     v.Samples,
			stackErrors: v.StackErrors, sampleMapFull: v.SampleMapFull,
			procMapFull: v.ProcMapFull, mapErrors: v.MapErrors,
		}
		s.taskWrites += v.TaskWrites
		s.otherWrites += v.OtherWrites
		s.targetChanges += v.TargetChanges
		s.unseenIn += v.UnseenIn
		s.unseenLost += v.UnseenLost
	}
	oc, err := k.offcpuBuf.read(k.objs.OffcpuStats)
	if err != nil {
		return fmt.Errorf("reading off-cpu stats: %w", err)
	}
	s.offStats = make([]offcpuVal, len(oc))
	for cpu, v := range oc {
		s.offStats[cpu] = offcpuVal{blockedNS: v.BlockedNs, sampledNS: v.SampledNs, stackErrors: v.StackErrors, mapErrors: v.MapErrors}
	}
	return nil
}

// readBusy reads each CPU's busy time (busy_ns) and the monotonic clock
// it is counted in, from which a window's idle time follows, its switch
// counts (sw) and its samplers' runs (fires, in struct last_val with what
// an idle CPU's sample touches). It is read after the task map and the
// target's totals, so that a window's busy time covers at least the
// target's time counted in it, and after the stats, so that a window's
// fires are never fewer than its samples.
func (k *kernel) readBusy(s *snapshot) error {
	last, err := k.lastBuf.read(k.objs.Last)
	if err != nil {
		return fmt.Errorf("reading per-cpu state: %w", err)
	}
	s.busyAt = time.Now()
	s.monoNS = uint64(s.busyAt.Sub(k.t0))
	s.busyNS = make([]uint64, len(last))
	s.sw = make([]cpuSW, len(last))
	if len(s.stats) != len(last) {
		return fmt.Errorf("per-cpu state of %d CPUs against stats of %d", len(last), len(s.stats))
	}
	for cpu, v := range last {
		s.busyNS[cpu] = v.BusyNs
		s.sw[cpu] = cpuSWOf(v)
		s.stats[cpu].fires = v.Fires
	}
	return nil
}

// cpuSW is what the BPF side counted of one CPU's software events
// (struct last_val): switches, switch-ins that perf counts a migration
// for, and a count that moves with every page fault taken there.
type cpuSW struct {
	switches, migrations, faults uint64
	// hostSeen and hostFaults: the fault counters as the sampler last
	// read them on the CPU, and faults + 1 then (0: never read).
	hostSeen   uint64
	hostFaults [bpf.CacheheatSizesHOST_FAULTS]uint64
}

func cpuSWOf(v bpf.CacheheatLastVal) cpuSW {
	return cpuSW{switches: v.Switches, migrations: v.MigratedIn, faults: v.FaultsSeen, hostSeen: v.HostSeen, hostFaults: v.HostFaults}
}

// groupRead is one CPU's software group as last read, with the BPF
// side's counts just before the read (before: faults since then mean
// a read) and just after it (after: the base that switches are added
// from).
type groupRead struct {
	vals          []counterValue
	before, after cpuSW
	shown         []counterValue // what the last window took, read or told
}

// show returns member j's value v for a window, never below what the
// last window took. A switch the tracepoint did not show is counted when
// the BPF side next notes its CPU (struct last_val): one that came just
// before a read and was noted after it is in the read and again in the
// switches told since, so a told value can run one ahead of perf's count
// until perf's passes it. A counter that went backwards would read as
// reset (delta).
func (r *groupRead) show(j int, v counterValue) counterValue {
	if r.shown == nil {
		r.shown = make([]counterValue, len(r.vals))
	}
	if j < len(r.shown) {
		if v.Value < r.shown[j].Value {
			v.Value = r.shown[j].Value
		}
		r.shown[j] = v
	}
	return v
}

// tells says whether the BPF side's counts at now tell the group's
// values: it was read before, and no task faulted on its CPU since.
func (r *groupRead) tells(now cpuSW) bool {
	return r.vals != nil && now.faults == r.before.faults
}

// readInPlace takes the fault members' values from the sampler's read on
// the CPU (struct last_val's host_faults), when that read came after the
// last fault noted there: then the group is told as if user space had read
// its faults at that moment (show keeps a window's value from going
// below the last one's). inPlace is the group's (counterGroup).
func (r *groupRead) readInPlace(inPlace []int, now cpuSW) {
	if r.vals == nil || inPlace == nil || now.hostSeen != now.faults+1 {
		return
	}
	for j, h := range inPlace {
		if h >= 0 && j < len(r.vals) {
			r.vals[j].Value = now.hostFaults[h]
		}
	}
	r.before.faults = now.faults
}

// told is group member j (event ev) as the BPF side tells it at now:
// its last read value plus the switches or migrations counted since;
// any other member's value stands.
func (r *groupRead) told(ev Event, j int, now cpuSW) counterValue {
	v := r.vals[j]
	switch ev.Config {
	case unix.PERF_COUNT_SW_CONTEXT_SWITCHES:
		v.Value += now.switches - r.after.switches
	case unix.PERF_COUNT_SW_CPU_MIGRATIONS:
		v.Value += now.migrations - r.after.migrations
	}
	return v
}

// prune deletes the task records marked exited at the previous snapshot
// (this one has taken their last counts) and remembers those marked now.
// A thread's last context switch follows its exit by microseconds, and
// snapshots are at least MinInterval apart. The map thus holds live
// threads only, however long the recording.
func (k *kernel) prune(exitedNow []bpf.CacheheatTaskKey) {
	for _, key := range k.exited {
		if err := k.objs.Tasks.Delete(key); err == nil {
			k.pruned++
		}
	}
	k.exited = exitedNow
}

// counterSlots is the number of counter slots of the BPF object: its
// countersN maps (MAX_EVENTS in bpf/cacheheat.h).
func counterSlots(spec *ebpf.CollectionSpec) int {
	n := 0
	for spec.Maps["counters"+strconv.Itoa(n)] != nil {
		n++
	}
	return n
}

// counterMapsOf lists the countersN maps by slot, from the generated
// struct's ebpf tags, so that the Go side has no copy of their number.
func counterMapsOf(m *bpf.CacheheatMaps) []*ebpf.Map {
	v := reflect.ValueOf(m).Elem()
	byslot := map[int]*ebpf.Map{}
	for i := range v.NumField() {
		n, ok := strings.CutPrefix(v.Type().Field(i).Tag.Get("ebpf"), "counters")
		if !ok {
			continue
		}
		if slot, err := strconv.Atoi(n); err == nil {
			byslot[slot] = v.Field(i).Interface().(*ebpf.Map)
		}
	}
	out := make([]*ebpf.Map, len(byslot))
	for slot, mp := range byslot {
		if slot < len(out) {
			out[slot] = mp
		}
	}
	return out
}

// drainOthers takes the samples of processes that are not targets since
// the last drain, most first.
//
// A drain starts with a walk of every bucket of the map, so it is done
// only when a sample was added since the last one (other_writes of cur,
// the snapshot just taken; the BPF side counts each add after making
// it). An add the count does not show yet stays in the map for the next
// drain: a window late, never lost.
func (k *kernel) drainOthers(cur *snapshot) []profile.OtherProcess {
	if cur.otherWrites == k.othersAt {
		return nil
	}
	k.othersAt = cur.otherWrites
	keys, vals, err := k.otherBuf.takeAll(k.objs.Others)
	if err != nil {
		// What was taken is kept; the rest waits for the next window.
		k.othersAt = 0
	}
	byPID := map[int]*profile.OtherProcess{}
	for i, key := range keys {
		n := vals[i]
		p := byPID[int(key.Tgid)]
		if p == nil {
			p = &profile.OtherProcess{PID: int(key.Tgid), Comm: cString(key.Comm[:])}
			byPID[p.PID] = p
		}
		p.Samples += n
	}
	out := make([]profile.OtherProcess, 0, len(byPID))
	for _, p := range byPID {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Samples != out[j].Samples {
			return out[i].Samples > out[j].Samples
		}
		return out[i].PID < out[j].PID
	})
	// The top of the list says who; the long tail of one-sample
	// processes says nothing and would grow every window.
	if len(out) > maxOthers {
		out = out[:maxOthers]
	}
	return out
}

// maxOthers is how many other processes a window lists.
const maxOthers = 10

// batchBuf reads every entry of a hash map in batches: a few system calls
// for the whole map, where iterating costs two per entry. Kernels without
// batch operations (before 5.6) are iterated. A per-CPU map's values come
// one per possible CPU for each key, in CPU order. What readAll returns is
// valid until its next call; with an error, what was read before it.
type batchBuf[K, V any] struct {
	keys []K
	vals []V
}

func (b *batchBuf[K, V]) readAll(m *ebpf.Map) ([]K, []V, error) {
	return b.batch(m, false)
}

// takeAll is readAll that deletes what it returns, in the same system
// calls (a bucket at a time): a count added after its bucket was taken
// stays for the next take. Without batch operations each key is looked up
// and deleted in one call.
func (b *batchBuf[K, V]) takeAll(m *ebpf.Map) ([]K, []V, error) {
	return b.batch(m, true)
}

func (b *batchBuf[K, V]) batch(m *ebpf.Map, del bool) ([]K, []V, error) {
	// A per-CPU map's batch holds a value per CPU for each key: fewer keys
	// a batch keep its buffer small on a large host.
	chunk, perKey := 4096, 1
	if m.Type() == ebpf.PerCPUHash {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			return nil, nil, err
		}
		chunk, perKey = 64, n
	}
	b.keys, b.vals = b.keys[:0], b.vals[:0]
	var cursor ebpf.MapBatchCursor
	for {
		n := len(b.keys)
		b.keys = slices.Grow(b.keys, chunk)[:n+chunk]
		b.vals = slices.Grow(b.vals, chunk*perKey)[:(n+chunk)*perKey]
		op := m.BatchLookup
		if del {
			op = m.BatchLookupAndDelete
		}
		got, err := op(&cursor, b.keys[n:], b.vals[n*perKey:], nil)
		b.keys, b.vals = b.keys[:n+got], b.vals[:(n+got)*perKey]
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return b.keys, b.vals, nil
		case errors.Is(err, ebpf.ErrNotSupported) && del:
			return takeEach[K, V](m)
		case errors.Is(err, ebpf.ErrNotSupported):
			return iterateAll[K, V](m)
		case err != nil:
			// What was taken before the error is gone from the map.
			return b.keys, b.vals, err
		}
	}
}

func iterateAll[K, V any](m *ebpf.Map) ([]K, []V, error) {
	var outK []K
	var outV []V
	var k K
	if m.Type() == ebpf.PerCPUHash {
		var v []V
		it := m.Iterate()
		for it.Next(&k, &v) {
			outK, outV = append(outK, k), append(outV, v...)
		}
		return outK, outV, it.Err()
	}
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		outK, outV = append(outK, k), append(outV, v)
	}
	return outK, outV, it.Err()
}

// takeEach lists a map's keys, then looks up and deletes each: a key
// deleted meanwhile is skipped, a count added after its key was taken
// stays. Not for per-CPU maps.
func takeEach[K, V any](m *ebpf.Map) ([]K, []V, error) {
	keys, _, err := iterateAll[K, V](m)
	if err != nil {
		return nil, nil, err
	}
	outK, outV := keys[:0], make([]V, 0, len(keys))
	for _, k := range keys {
		var v V
		if err := m.LookupAndDelete(&k, &v); err != nil {
			continue
		}
		outK, outV = append(outK, k), append(outV, v)
	}
	return outK, outV, nil
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
