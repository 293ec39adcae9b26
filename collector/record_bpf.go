package collector

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/profile"
)

// Sample slots of the BPF side (enum sample_slot in bpf/cacheheat.h):
// cpu-clock and the primary miss event.
const (
	slotClock = int(bpf.CacheheatSampleSlotSLOT_CLOCK)
	slotMiss  = int(bpf.CacheheatSampleSlotSLOT_MISS)
	// slotOffCPU marks off-CPU time in the samples map: its value is
	// nanoseconds blocked, its stacks are in offcpu_stacks.
	slotOffCPU = int(bpf.CacheheatSampleSlotSLOT_OFFCPU)
)

// Off-CPU stacks are taken for one voluntary switch-out in k, at random,
// k set every 100 ms so that a CPU takes about offCPUStacksPerSec stack
// pairs a second (offcpu_stacks_per_sec), and never below offCPUMinK
// (offcpu_min_k): taking stacks costs about ten times the rest of a
// switch, so even at low switch rates it must stay rare for on_switch's
// mean cost to stay near its floor. The blocked time of every switch-out
// is still counted, and a sampled one's time counts 1/chance times.
const (
	offCPUStacksPerSec = 50
	offCPUMinK         = 32
)

// Target modes of the BPF side (enum mode in bpf/cacheheat.h).
const (
	modeAll    = uint32(bpf.CacheheatModeMODE_ALL)
	modePIDs   = uint32(bpf.CacheheatModeMODE_PIDS)
	modeCgroup = uint32(bpf.CacheheatModeMODE_CGROUP)
)

// ErrHost is wrapped by errors that mean this host cannot record: no
// privileges, no BTF, the kernel refused the BPF programs. The command maps
// it to exit code 3.
var ErrHost = errors.New("this host cannot record")

// kernelConfig is what the BPF side needs before load.
type kernelConfig struct {
	mode     uint32
	cgroupID uint64
	// cgroupLevel is the target cgroup's depth, for matching descendants.
	cgroupLevel uint32
	pids        []int
	// execPIDs become targets when they exec (a gated command).
	execPIDs []int
	counted  []Event // measured events, slot = index
	cpus     []int   // CPUs to count and sample on
	sampleHz int
	// missEvent, when non-nil, is sampled every missPeriod events.
	missEvent  *Event
	missPeriod uint64
	// rotated are the slots a simulated PMU multiplexes over muxCounters
	// counters, with refSlot's enabled time standing for theirs (muxPlan);
	// empty on a real PMU, where the kernel multiplexes.
	rotated     []int
	muxCounters int
	refSlot     int
	// byCgroup counts by cgroup instead of by thread, without stacks
	// (by_cgroup in bpf/cacheheat.c): the exporter's mode.
	byCgroup bool
}

// kernel holds every kernel object of a recording: the loaded programs and
// maps, their links and the perf events. close releases all of them.
type kernel struct {
	objs     bpf.CacheheatObjects
	links    []link.Link
	counters [][]*perfCounter // [slot][i], CPU = cfg.cpus[i]
	samplers []*perfCounter
	possible int
	cfg      kernelConfig
	buf      uint32 // active stack buffer
	missOK   bool
	drains   int // drainSamples calls, for the periodic stack map sweep
	// Buffers of the batch reads, kept from window to window.
	taskBuf batchBuf[bpf.CacheheatTaskKey, bpf.CacheheatTaskVal]
	// The task map's last walk: whether there was one, how many records
	// it found, and the records created (stats new_tasks) before it.
	tasksWalked  bool
	tasksLast    int
	tasksCreated uint64
	sampleBuf    batchBuf[bpf.CacheheatSampleKey, uint64]
	// keysTaken is, per buffer, the sample keys the BPF side had created
	// in it (stats new_keys, summed over CPUs) when it was last drained.
	keysTaken [2]uint64
	mux       *rotator
	stat      statFile // /proc/stat, for the CPUs' idle time
	// groups are, per CPU of cfg.cpus, the slots of the software
	// counters, which form one perf group led by the first.
	groups []counterGroup
	// exited holds the task records the BPF side marked exited at the
	// previous snapshot: deleted after the next one, which has their last
	// counts.
	exited []bpf.CacheheatTaskKey
	pruned uint64
}

// checkPrivileges says what is missing for BPF recording, naming it.
func checkPrivileges() error {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return fmt.Errorf("%w: no kernel BTF (/sys/kernel/btf/vmlinux is missing): use a kernel built with CONFIG_DEBUG_INFO_BTF=y", ErrHost)
	}
	if os.Geteuid() == 0 {
		return nil
	}
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("%w: reading capabilities: %w", ErrHost, err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	var missing []string
	if !has(unix.CAP_BPF) && !has(unix.CAP_SYS_ADMIN) {
		missing = append(missing, "CAP_BPF")
	}
	if !has(unix.CAP_PERFMON) && !has(unix.CAP_SYS_ADMIN) {
		missing = append(missing, "CAP_PERFMON")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: not root and missing %v: run with sudo, or grant them with 'setcap cap_bpf,cap_perfmon+ep cacheheat'", ErrHost, missing)
	}
	return nil
}

// openKernel loads the programs, opens the counters, attaches the
// programs and samplers and then enables the counters, in that order so
// that no program runs before what it reads exists. On error everything
// opened so far is closed.
func openKernel(cfg kernelConfig) (_ *kernel, err error) {
	possible, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("counting possible cpus: %w", err)
	}
	k := &kernel{possible: possible, cfg: cfg, stat: statFile{path: "/proc/stat"}}
	defer func() {
		if err != nil {
			k.close()
		}
	}()
	if err := k.load(); err != nil {
		return nil, err
	}
	for _, pid := range cfg.pids {
		if err := k.addPID(pid, targetYes); err != nil {
			return nil, err
		}
	}
	for _, pid := range cfg.execPIDs {
		if err := k.addPID(pid, targetAtExec); err != nil {
			return nil, err
		}
	}
	// Counters go into the PERF_EVENT_ARRAY before the programs attach, so
	// the first read on each CPU finds them.
	if err := k.openCounters(); err != nil {
		return nil, err
	}
	if err := k.attachTracepoints(); err != nil {
		return nil, err
	}
	if err := k.attachSamplers(); err != nil {
		return nil, err
	}
	if err := k.enable(); err != nil {
		return nil, err
	}
	return k, nil
}

// load sets the BPF object's constants from the configuration and loads
// its programs and maps into the kernel.
func (k *kernel) load() error {
	cfg := k.cfg
	spec, err := bpf.LoadCacheheat()
	if err != nil {
		return fmt.Errorf("loading bpf spec: %w", err)
	}
	if n := counterSlots(spec); len(cfg.counted) > n {
		return fmt.Errorf("%d distinct events requested; the bpf object has %d counter slots (MAX_EVENTS, sized to the largest CPU catalogue): pick fewer with -e", len(cfg.counted), n)
	}
	ref := int32(-1)
	if len(cfg.rotated) > 0 {
		ref = int32(cfg.refSlot)
	}
	src, nrCounters, faultSlots := slotSources(cfg.counted, counterSlots(spec))
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		return fmt.Errorf("reading the monotonic clock: %w", err)
	}
	for name, v := range map[string]any{
		"target_mode":           cfg.mode,
		"target_cgroup":         cfg.cgroupID,
		"target_cgroup_level":   cfg.cgroupLevel,
		"nr_events":             uint32(len(cfg.counted)),
		"slot_src":              src,
		"nr_counters":           nrCounters,
		"fault_slots":           faultSlots,
		"start_ns":              uint64(now.Nano()),
		"enabled_ref_slot":      ref,
		"offcpu_stacks_per_sec": uint64(offCPUStacksPerSec),
		"offcpu_min_k":          uint64(offCPUMinK),
		"by_cgroup":             cfg.byCgroup,
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("setting bpf variable %s: %w", name, err)
		}
	}
	if !cfg.byCgroup {
		// Unused in a recording: one entry each instead of megabytes of
		// preallocated kernel memory.
		spec.Maps["cgroups"].MaxEntries = 1
	} else {
		spec.Maps["cgroups"].MaxEntries = cgroupMapEntries
	}
	if err := spec.LoadAndAssign(&k.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("%w: the kernel's verifier refused the bpf programs: %v", ErrHost, ve)
		}
		return fmt.Errorf("%w: loading bpf programs: %w", ErrHost, err)
	}
	return nil
}

// openCounters opens each counted event on each CPU, disabled, and puts it
// in its slot's PERF_EVENT_ARRAY for the programs to read. On each CPU the
// software events form one group, read at once (readCounters); hardware
// events stay alone, so that grouping never changes how they are
// scheduled or multiplexed.
func (k *kernel) openCounters() error {
	k.counters = make([][]*perfCounter, len(k.cfg.counted))
	k.groups = make([]counterGroup, len(k.cfg.cpus))
	counterMaps := counterMapsOf(&k.objs.CacheheatMaps)
	for slot, ev := range k.cfg.counted {
		for i, cpu := range k.cfg.cpus {
			g := &k.groups[i]
			var leader *perfCounter
			if ev.Kind == KindSoftware && len(g.slots) > 0 {
				leader = k.counters[g.slots[0]][i]
			}
			pc, err := openCounter(ev, cpu, leader)
			if err != nil {
				return err
			}
			if ev.Kind == KindSoftware {
				g.slots = append(g.slots, slot)
			}
			k.counters[slot] = append(k.counters[slot], pc)
			if err := counterMaps[slot].Put(uint32(cpu), uint32(pc.fd)); err != nil {
				return fmt.Errorf("adding %s on cpu %d to the counter array: %w", ev.Name, cpu, err)
			}
		}
	}
	return nil
}

// attachTracepoints attaches the scheduler and task programs (tp_btf).
func (k *kernel) attachTracepoints() error {
	for _, a := range []struct {
		prog *ebpf.Program
		name string
	}{
		{k.objs.OnSwitch, "sched_switch"},
		{k.objs.OnWakeup, "sched_wakeup"},
		{k.objs.OnWaking, "sched_waking"},
		{k.objs.OnWakeupNew, "sched_wakeup_new"},
		{k.objs.OnFork, "sched_process_fork"},
		{k.objs.OnExec, "sched_process_exec"},
		{k.objs.OnExit, "sched_process_exit"},
		{k.objs.OnRename, "task_rename"},
	} {
		l, err := link.AttachTracing(link.TracingOptions{Program: a.prog})
		if err != nil {
			return fmt.Errorf("%w: attaching to %s: %w", ErrHost, a.name, err)
		}
		k.links = append(k.links, l)
	}
	return nil
}

// attachSamplers opens the cpu-clock sampler, and the miss event's when
// there is one, on each CPU, disabled, with their programs attached.
func (k *kernel) attachSamplers() error {
	clock := Event{Name: "cpu-clock", Kind: KindSoftware, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
	for _, cpu := range k.cfg.cpus {
		if err := k.attachSampler(k.objs.SampleClock, clock, cpu, k.cfg.sampleHz, 0); err != nil {
			return err
		}
	}
	if k.cfg.missEvent == nil {
		return nil
	}
	k.missOK = true
	for _, cpu := range k.cfg.cpus {
		if err := k.attachSampler(k.objs.SampleMiss, *k.cfg.missEvent, cpu, 0, k.cfg.missPeriod); err != nil {
			return err
		}
	}
	return nil
}

// enable starts the counters (a simulated PMU's rotated ones through its
// rotator) and then the samplers.
func (k *kernel) enable() error {
	for slot, cs := range k.counters {
		if slices.Contains(k.cfg.rotated, slot) {
			continue // the rotator enables them in turn
		}
		for _, pc := range cs {
			if err := pc.enable(); err != nil {
				return err
			}
		}
	}
	if len(k.cfg.rotated) > 0 {
		k.mux = newRotator(k.cfg.rotated, k.cfg.muxCounters, k.counters)
		if err := k.mux.start(muxInterval); err != nil {
			return err
		}
	}
	for _, pc := range k.samplers {
		if err := pc.enable(); err != nil {
			return err
		}
	}
	return nil
}

// Where the BPF side takes a slot's counts from (enum slot_source in
// bpf/cacheheat.h).
const (
	srcCounter   = uint32(bpf.CacheheatSlotSourceSRC_COUNTER) // its per-CPU perf counter
	srcClock     = uint32(bpf.CacheheatSlotSourceSRC_CLOCK)
	srcSwitch    = uint32(bpf.CacheheatSlotSourceSRC_SWITCH)
	srcMigration = uint32(bpf.CacheheatSlotSourceSRC_MIGRATION)
	srcFault     = uint32(bpf.CacheheatSlotSourceSRC_FAULT)
	srcMajFault  = uint32(bpf.CacheheatSlotSourceSRC_MAJFAULT)
)

// softwareSources are the software events the BPF side counts from the
// scheduler and the task's own counters instead of reading their perf
// counters at every switch.
var softwareSources = map[uint64]uint32{
	unix.PERF_COUNT_SW_CPU_CLOCK:        srcClock,
	unix.PERF_COUNT_SW_CONTEXT_SWITCHES: srcSwitch,
	unix.PERF_COUNT_SW_CPU_MIGRATIONS:   srcMigration,
	unix.PERF_COUNT_SW_PAGE_FAULTS:      srcFault,
	unix.PERF_COUNT_SW_PAGE_FAULTS_MAJ:  srcMajFault,
}

// slotSources says, per slot (n of them: MAX_EVENTS), where its counts
// come from, how many slots are read from perf counters at every switch of
// a target, and which are fault slots (bit i: slot i), read only after the
// task faulted. Only events of the software kind qualify: an event of
// another kind opened as a software counter (a simulated PMU's stand-in)
// still takes the counter path, except a context-switches stand-in, which
// perf bumps after the switch tracepoint, so that a counter read there
// would charge each switch to the next task.
func slotSources(evs []Event, n int) (src []uint32, counters uint32, faults uint64) {
	src = make([]uint32, n)
	for i, ev := range evs {
		s, ok := softwareSources[ev.Config]
		switch attr := ev.Attr(); {
		case attr.Type == unix.PERF_TYPE_SOFTWARE && attr.Config == unix.PERF_COUNT_SW_CONTEXT_SWITCHES:
			s = srcSwitch
		case ev.Kind != KindSoftware || ev.StandIn != nil || ev.Type != unix.PERF_TYPE_SOFTWARE || !ok:
			s = srcCounter
			counters++
		}
		if s == srcFault || s == srcMajFault {
			faults |= 1 << i
		}
		if i < n {
			src[i] = s
		}
	}
	return src, counters, faults
}

func (k *kernel) attachSampler(prog *ebpf.Program, ev Event, cpu, hz int, period uint64) error {
	pc, err := openSampler(ev, cpu, hz, period)
	if err != nil {
		return err
	}
	k.samplers = append(k.samplers, pc)
	l, err := link.AttachRawLink(link.RawLinkOptions{Target: pc.fd, Program: prog, Attach: ebpf.AttachPerfEvent})
	if err != nil {
		return fmt.Errorf("%w: attaching the sampling program to %s on cpu %d: %w", ErrHost, ev.Name, cpu, err)
	}
	k.links = append(k.links, l)
	return nil
}

// Values of the targets map (enum target_state in bpf/cacheheat.h).
const (
	targetYes    = uint8(bpf.CacheheatTargetStateTARGET_YES)
	targetAtExec = uint8(bpf.CacheheatTargetStateTARGET_AT_EXEC)
)

// addPID makes a process (and, through the fork tracepoint, its future
// children) a target, now or when it next execs.
func (k *kernel) addPID(pid int, how uint8) error {
	if err := k.objs.Targets.Put(uint32(pid), how); err != nil {
		return fmt.Errorf("adding pid %d to the targets: %w", pid, err)
	}
	return nil
}

// targetPIDs lists the processes in the BPF target set (-p, command).
func (k *kernel) targetPIDs() ([]int, error) {
	var pids []int
	var key uint32
	var val uint8
	it := k.objs.Targets.Iterate()
	for it.Next(&key, &val) {
		pids = append(pids, int(key))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading target pids: %w", err)
	}
	return pids, nil
}

// close releases every link, program, map and perf event. Links go first
// so no program runs on a closed counter.
func (k *kernel) close() error {
	var errs []error
	errs = append(errs, k.mux.close())
	k.mux = nil
	errs = append(errs, k.stat.close())
	for _, l := range k.links {
		errs = append(errs, l.Close())
	}
	k.links = nil
	for _, pc := range k.samplers {
		errs = append(errs, pc.close())
	}
	k.samplers = nil
	for _, cs := range k.counters {
		for _, pc := range cs {
			errs = append(errs, pc.close())
		}
	}
	k.counters = nil
	errs = append(errs, k.objs.Close())
	return errors.Join(errs...)
}

// snapshot reads every cumulative value: the seam between the kernel and
// the window arithmetic (window.go).
func (k *kernel) snapshot() (*snapshot, error) {
	s := &snapshot{}
	var err error
	// The stats first: they say whether the task map can have changed.
	if err := k.readStats(s); err != nil {
		return nil, err
	}
	if s.tasks, err = k.readTasks(s.stats); err != nil {
		return nil, err
	}
	if s.target, err = k.readTargetTotals(); err != nil {
		return nil, err
	}
	if s.host, err = k.readCounters(); err != nil {
		return nil, err
	}
	if err := k.readBusy(s); err != nil {
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
		if s.waits, err = k.readWaits(); err != nil {
			return nil, err
		}
	}
	s.idleNS = k.stat.idle()
	return s, nil
}

// readWaits reads the target's cumulative off-CPU time by wait code,
// summed over CPUs. The map holds the few codes the target blocked with,
// and never shrinks.
func (k *kernel) readWaits() (map[uint32]waitVal, error) {
	out := map[uint32]waitVal{}
	var code uint32
	var vals []bpf.CacheheatWaitVal
	it := k.objs.Waits.Iterate()
	for it.Next(&code, &vals) {
		var w waitVal
		for _, v := range vals {
			w.ns += v.Ns
			w.count += v.Count
			if w.hist == nil {
				w.hist = make([]uint64, len(v.Hist))
			}
			for b, n := range v.Hist {
				w.hist[b] += n
			}
		}
		out[code] = w
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the wait map: %w", err)
	}
	return out, nil
}

// drainPeers takes the target's waits on other processes since the last
// drain, by the process that woke it, longest first.
func (k *kernel) drainPeers() []profile.Peer {
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
// costs even when it is empty; so a map that was empty at the last walk,
// and in which the BPF side created no record since (stats, read just
// before), is not walked again.
func (k *kernel) readTasks(stats []statsVal) (map[taskKey]taskVal, error) {
	var created uint64
	for _, s := range stats {
		created += s.newTasks
	}
	if k.tasksWalked && k.tasksLast == 0 && created == k.tasksCreated {
		return map[taskKey]taskVal{}, nil
	}
	keys, vals, err := k.taskBuf.readAll(k.objs.Tasks)
	if err != nil {
		return nil, fmt.Errorf("reading the task map: %w", err)
	}
	k.tasksWalked, k.tasksLast, k.tasksCreated = true, len(keys), created
	tasks := make(map[taskKey]taskVal, len(keys))
	var exited []bpf.CacheheatTaskKey
	for i, key := range keys {
		tv := taskVal{comm: cString(vals[i].Comm[:]), counts: append([]uint64(nil), vals[i].Counts[:]...)}
		tasks[taskKey{tgid: int(key.Tgid), tid: int(key.Pid)}] = tv
		if vals[i].Exited != 0 {
			exited = append(exited, key)
		}
	}
	k.prune(exited)
	return tasks, nil
}

// readTargetTotals reads what the targets counted, [slot][cpu].
func (k *kernel) readTargetTotals() ([][]uint64, error) {
	var zero uint32
	var tots []bpf.CacheheatTotalsVal
	if err := k.objs.TargetTotals.Lookup(&zero, &tots); err != nil {
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

// counterGroup lists the slots of one CPU's group of software counters.
type counterGroup struct {
	slots []int
}

// readCounters reads what every task counted, [slot][cpu], from the perf
// counters: each CPU's software group at once, the others one by one.
func (k *kernel) readCounters() ([][]counterValue, error) {
	host := make([][]counterValue, len(k.cfg.counted))
	for slot := range host {
		host[slot] = make([]counterValue, k.possible)
	}
	for i, g := range k.groups {
		if len(g.slots) == 0 {
			continue
		}
		vals := make([]counterValue, len(g.slots))
		if err := k.counters[g.slots[0]][i].readGroup(vals); err != nil {
			return nil, err
		}
		for j, slot := range g.slots {
			host[slot][k.counters[slot][i].cpu] = vals[j]
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
	var zero uint32
	var hs []bpf.CacheheatHistVal
	if err := k.objs.Hists.Lookup(&zero, &hs); err != nil {
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
	var zero uint32
	var st []bpf.CacheheatStatsVal
	if err := k.objs.Stats.Lookup(&zero, &st); err != nil {
		return fmt.Errorf("reading bpf stats: %w", err)
	}
	s.stats = make([]statsVal, len(st))
	for cpu, v := range st {
		s.stats[cpu] = statsVal{
			fires: v.Fires, samples: v.Samples,
			stackErrors: v.StackErrors, sampleMapFull: v.SampleMapFull,
			procMapFull: v.ProcMapFull, mapErrors: v.MapErrors,
			newTasks: v.NewTasks,
		}
	}
	var oc []bpf.CacheheatOffcpuStat
	if err := k.objs.OffcpuStats.Lookup(&zero, &oc); err != nil {
		return fmt.Errorf("reading off-cpu stats: %w", err)
	}
	s.offStats = make([]offcpuVal, len(oc))
	for cpu, v := range oc {
		s.offStats[cpu] = offcpuVal{blockedNS: v.BlockedNs, sampledNS: v.SampledNs, stackErrors: v.StackErrors, mapErrors: v.MapErrors}
	}
	return nil
}

// readBusy reads each CPU's busy time (busy_ns). It is read after the
// task map and the counters, so that a window's busy time covers at
// least the target's time counted in it.
func (k *kernel) readBusy(s *snapshot) error {
	var zero uint32
	var last []bpf.CacheheatLastVal
	if err := k.objs.Last.Lookup(&zero, &last); err != nil {
		return fmt.Errorf("reading per-cpu state: %w", err)
	}
	s.busyNS = make([]uint64, len(last))
	for cpu, v := range last {
		s.busyNS[cpu] = v.BusyNs
	}
	return nil
}

// statFile reads /proc/stat once a window: kept open and read from offset
// 0 (which makes the kernel generate it afresh) into a kept buffer, one
// system call instead of the open, poller registration, reads and close
// of os.ReadFile; an idle recorder's windows are mostly such overhead.
type statFile struct {
	path string
	f    *os.File
	buf  []byte
}

// idle reads each CPU's cumulative idle time (idle + iowait), in
// nanoseconds; nil when it cannot.
func (s *statFile) idle() []uint64 {
	if s.f == nil {
		f, err := os.Open(s.path)
		if err != nil {
			return nil
		}
		s.f, s.buf = f, make([]byte, 16<<10)
	}
	for {
		n, err := s.f.ReadAt(s.buf, 0)
		if err == io.EOF || (err == nil && n < len(s.buf)) {
			return parseIdle(s.buf[:n])
		}
		if err != nil {
			return nil
		}
		s.buf = make([]byte, 2*len(s.buf)) // it did not fit
	}
}

func (s *statFile) close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// parseIdle reads the per-CPU idle + iowait times of /proc/stat's text.
func parseIdle(b []byte) []uint64 {
	var out []uint64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil || cpu < 0 || cpu > 1<<16 {
			continue
		}
		idle, err1 := strconv.ParseUint(f[4], 10, 64)
		iowait, err2 := strconv.ParseUint(f[5], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		for len(out) <= cpu {
			out = append(out, 0)
		}
		// USER_HZ is 100 on every Linux architecture's user ABI.
		out[cpu] = (idle + iowait) * 1e7
	}
	return out
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
func (k *kernel) drainOthers() []profile.OtherProcess {
	var key bpf.CacheheatOtherKey
	var n uint64
	var keys []bpf.CacheheatOtherKey
	byPID := map[int]*profile.OtherProcess{}
	it := k.objs.Others.Iterate()
	for it.Next(&key, &n) {
		keys = append(keys, key)
	}
	for _, key := range keys {
		if err := k.objs.Others.LookupAndDelete(&key, &n); err != nil {
			continue
		}
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

// drainSamples flips the active stack buffer, then takes every sample
// count of the previous buffer with its stacks' addresses and clears that
// buffer's stack map. Samples whose stack cannot be read any more count as
// stack errors.
func (k *kernel) drainSamples() ([]rawSample, uint64, error) {
	old := k.buf
	k.buf ^= 1
	var zero uint32
	if err := k.objs.Ctrl.Put(zero, k.buf); err != nil {
		return nil, 0, fmt.Errorf("switching stack buffers: %w", err)
	}
	keys, cnts, err := k.takeSamples(old)
	if err != nil {
		return nil, 0, err
	}
	sr := stackReader{stacks: k.objs.Stacks0, offcpu: k.objs.OffcpuStacks, read: map[stackRef][]uint64{}}
	if old == 1 {
		sr.stacks = k.objs.Stacks1
	}
	var out []rawSample
	var lost uint64
	for i, key := range keys {
		us, ok1 := sr.stack(key.Slot, key.Ustack)
		ks, ok2 := sr.stack(key.Slot, key.Kstack)
		if key.Gstack != 0 {
			us = k.withGoroutine(us, key.Gstack)
		}
		if (!ok1 || !ok2) && int(key.Slot) != slotOffCPU {
			lost += cnts[i] // a count of samples; off-CPU values are nanoseconds
		}
		out = append(out, rawSample{
			pid: int(key.Pid), tid: int(key.Tid), cpu: int(key.Cpu), slot: int(key.Slot),
			user: us, kernel: ks, count: cnts[i], wait: key.Wait,
		})
	}
	k.drains++
	sr.clear(k.drains%sweepEvery == 0)
	return out, lost, nil
}

// takeSamples reads the sample counts of stack buffer buf and deletes
// them from the samples map.
func (k *kernel) takeSamples(buf uint32) ([]bpf.CacheheatSampleKey, []uint64, error) {
	// Walking the map visits every bucket, which costs milliseconds even
	// when it is empty: a recorder of idle targets skips a buffer in
	// which no key was created since it was last drained (it holds none).
	created, err := k.newKeys(buf)
	if err != nil {
		return nil, nil, err
	}
	if created == k.keysTaken[buf] {
		return nil, nil, nil
	}
	k.keysTaken[buf] = created
	all, counts, err := k.sampleBuf.readAll(k.objs.Samples)
	if err != nil {
		return nil, nil, fmt.Errorf("reading samples: %w", err)
	}
	var keys []bpf.CacheheatSampleKey
	var cnts []uint64
	for i, key := range all {
		if uint32(key.Buf) == buf {
			keys = append(keys, key)
			cnts = append(cnts, counts[i])
		}
	}
	if len(keys) > 0 {
		// Only this process deletes samples, and the programs write to the
		// other buffer now: every key read is still there.
		if _, err := k.objs.Samples.BatchDelete(keys, nil); err != nil {
			return nil, nil, fmt.Errorf("clearing samples: %w", err)
		}
	}
	return keys, cnts, nil
}

// newKeys sums over CPUs the sample keys created in buffer buf so far.
func (k *kernel) newKeys(buf uint32) (uint64, error) {
	var zero uint32
	var st []bpf.CacheheatStatsVal
	if err := k.objs.Stats.Lookup(&zero, &st); err != nil {
		return 0, fmt.Errorf("reading sample stats: %w", err)
	}
	var n uint64
	for _, s := range st {
		n += s.NewKeys[buf&1]
	}
	return n, nil
}

// withGoroutine appends a goroutine's frames to the user stack of the
// thread it is locked to: they continue it, outermost last (see
// go_locked_stack).
func (k *kernel) withGoroutine(us []uint64, id uint32) []uint64 {
	var gs bpf.CacheheatGoStack
	if err := k.objs.Gostacks.Lookup(id, &gs); err != nil {
		return us
	}
	us = append([]uint64(nil), us...) // us may be shared by the stack cache
	for _, pc := range gs.Pc {
		if pc == 0 {
			break
		}
		us = append(us, pc)
	}
	return us
}

// stackRef names a stack: off-CPU samples name stacks of their own map.
type stackRef struct {
	offcpu bool
	id     int32
}

// stackReader reads the stacks of one drain, each once, and remembers
// which ids it read so that they can be cleared.
type stackReader struct {
	stacks *ebpf.Map // the drained buffer's stack map
	offcpu *ebpf.Map // never cleared (see offcpu_stacks)
	read   map[stackRef][]uint64
}

// stack returns a stack's addresses; ok is false when it cannot be read
// any more. A negative id is no stack.
func (sr *stackReader) stack(slot uint16, id int32) ([]uint64, bool) {
	if id < 0 {
		return nil, true
	}
	ref := stackRef{int(slot) == slotOffCPU, id}
	if a, ok := sr.read[ref]; ok {
		return a, a != nil
	}
	m := sr.stacks
	if ref.offcpu {
		m = sr.offcpu
	}
	var raw [bpf.CacheheatSizesMAX_STACK_DEPTH]uint64
	if err := m.Lookup(uint32(id), &raw); err != nil {
		sr.read[ref] = nil
		return nil, false
	}
	var addrs []uint64
	for _, a := range raw {
		if a == 0 {
			break
		}
		addrs = append(addrs, a)
	}
	sr.read[ref] = addrs
	return addrs, true
}

// clear deletes the drained buffer's stack ids: the kernel hands out the
// same ids again for other stacks. The ids the samples named are deleted
// one by one (a stack map has no batch operations); a stack whose sample
// was lost (a full sample map) goes in a sweep of every id.
func (sr *stackReader) clear(sweep bool) {
	if sweep {
		var id uint32
		var raw [bpf.CacheheatSizesMAX_STACK_DEPTH]uint64
		it := sr.stacks.Iterate()
		for it.Next(&id, &raw) {
			sr.read[stackRef{id: int32(id)}] = nil
		}
	}
	for ref := range sr.read {
		// The off-CPU stack map is never cleared (see offcpu_stacks).
		if ref.id >= 0 && !ref.offcpu {
			_ = sr.stacks.Delete(uint32(ref.id))
		}
	}
}

// sweepEvery is how often (in drains) every id of a stack map is cleared.
const sweepEvery = 64

// batchBuf reads every entry of a hash map in batches: a few system calls
// for the whole map, where iterating costs two per entry. Kernels without
// batch operations (before 5.6) are iterated. What readAll returns is
// valid until its next call.
type batchBuf[K, V any] struct {
	keys []K
	vals []V
}

func (b *batchBuf[K, V]) readAll(m *ebpf.Map) ([]K, []V, error) {
	const chunk = 4096
	b.keys, b.vals = b.keys[:0], b.vals[:0]
	var cursor ebpf.MapBatchCursor
	for {
		n := len(b.keys)
		b.keys, b.vals = slices.Grow(b.keys, chunk)[:n+chunk], slices.Grow(b.vals, chunk)[:n+chunk]
		got, err := m.BatchLookup(&cursor, b.keys[n:], b.vals[n:], nil)
		b.keys, b.vals = b.keys[:n+got], b.vals[:n+got]
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return b.keys, b.vals, nil
		case errors.Is(err, ebpf.ErrNotSupported):
			return iterateAll[K, V](m)
		case err != nil:
			return nil, nil, err
		}
	}
}

func iterateAll[K, V any](m *ebpf.Map) ([]K, []V, error) {
	var outK []K
	var outV []V
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		outK, outV = append(outK, k), append(outV, v)
	}
	return outK, outV, it.Err()
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
