package collector

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/bpf"
)

// Loading the kernel side: checking privileges, loading the BPF objects,
// opening the per-CPU counters, attaching the tracepoints and samplers,
// the targets map, and closing it all (kernel_maps.go reads the maps each
// window, kernel_samples.go drains the sampled stacks).

// Sample slots of the BPF side (enum sample_slot in bpf/cacheheat.h):
// cpu-clock and the primary miss event.
const (
	slotClock = int(bpf.CacheheatSampleSlotSLOT_CLOCK)
	slotMiss  = int(bpf.CacheheatSampleSlotSLOT_MISS)
	// slotOffCPU marks off-CPU time in the samples map: its value is
	// nanoseconds blocked, its stacks are in offcpu_stacks.
	slotOffCPU = int(bpf.CacheheatSampleSlotSLOT_OFFCPU)
	slotWake   = int(bpf.CacheheatSampleSlotSLOT_WAKE)
	// slotOffCPUUstack carries an off-CPU sample's user stack, walked at
	// its switch-out; the thread's next slotOffCPU record, whose ustack is
	// ownUstack, stands for it (sampleReader.add).
	slotOffCPUUstack = int(bpf.CacheheatSampleSlotSLOT_OFFCPU_USTACK)
	ownUstack        = int32(0x7fffffff) // OWN_USTACK in bpf/cacheheat.c
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
	muxMasks    []uint64 // each rotated slot's counters (Event.Counters)
	muxCounters int
	refSlot     int
	// byCgroup counts by cgroup instead of by thread, without stacks
	// (by_cgroup in bpf/cacheheat.c): the exporter's mode.
	byCgroup bool
	// ringBytes is the sample ring's size, a power of two of whole pages;
	// 0: sized by the CPU count (ringBytes). Tests set it small to fill it.
	ringBytes uint32
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
	missOK   bool
	samples  *sampleReader
	// Buffers of the batch reads, kept from window to window.
	taskBuf batchBuf[bpf.CacheheatTaskKey, bpf.CacheheatTaskVal]
	waitBuf batchBuf[uint32, bpf.CacheheatWaitVal]
	// otherBuf takes the others map (drainOthers).
	otherBuf batchBuf[bpf.CacheheatOtherKey, uint64]
	// faultSlots are the fault slots (bit i: slot i) as the BPF side was
	// told them at load (fault_slots): the ones its sampler reads in place.
	faultSlots uint64
	// The per-CPU arrays read each window, through kept buffers.
	statsBuf  perCPU[bpf.CacheheatStatsVal]
	offcpuBuf perCPU[bpf.CacheheatOffcpuStat]
	lastBuf   perCPU[bpf.CacheheatLastVal]
	totalsBuf perCPU[bpf.CacheheatTotalsVal]
	histsBuf  perCPU[bpf.CacheheatHistVal]
	// The task map's last walk (nil: none): what it read, and the writes
	// to task records (stats task_writes) before it.
	tasks       map[taskKey]taskVal
	tasksWrites uint64
	// The off-CPU waits ended (the off-CPU histogram's count) at the last
	// snapshot (waitIns), at the last walk of waits, with its values
	// (waits, waitsAt), and at the last drain of peers (peersAt; 0 before
	// any: no wait ended, no peer was written); see readWaits.
	waitIns uint64
	waits   map[uint32]waitVal
	waitsAt uint64
	peersAt uint64
	// The samples added to the others map (stats other_writes) at the
	// last drain of that map; see drainOthers.
	othersAt uint64
	// offcpuStacks are the off-CPU stacks read so far, by id.
	offcpuStacks map[int32][]uint64
	mux          *rotator
	t0           time.Time // the origin of the snapshots' monoNS
	// groups are, per CPU of cfg.cpus, the slots of the software
	// counters, which form one perf group led by the first.
	groups []counterGroup
	// reads are, per CPU of cfg.cpus, its software group's last read
	// (readCounters).
	reads []groupRead
	// exited holds the task records the BPF side marked exited at the
	// previous snapshot: deleted after the next one, which has their last
	// counts.
	exited []bpf.CacheheatTaskKey
	pruned uint64
	// targetBytes is the memory of the target_bytes map (MODE_PIDS):
	// byte tgid is tgid's target state.
	targetBytes *ebpf.Memory
	// runqSchedInfo says that run-queue latency comes from the kernel's
	// own account (runq_from_sched_info): sched_wakeup and
	// sched_wakeup_new then have no program.
	runqSchedInfo bool
	// nrCounters is how many events are read from perf counters at the
	// switches (hardware events: nr_counters).
	nrCounters uint32
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
	k := &kernel{possible: possible, cfg: cfg, t0: time.Now()}
	defer func() {
		if err != nil {
			k.close()
		}
	}()
	if err := k.load(); err != nil {
		return nil, err
	}
	if k.samples, err = newSampleReader(k.objs.SampleRing); err != nil {
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
	k.faultSlots = faultSlots
	k.nrCounters = nrCounters
	ring := ringBytes(k.possible)
	if cfg.ringBytes != 0 {
		ring = cfg.ringBytes
	}
	if cfg.byCgroup {
		ring = uint32(os.Getpagesize()) // counts by cgroup take no samples
	}
	spec.Maps["sample_ring"].MaxEntries = ring
	k.runqSchedInfo = !runqAtWakeup && runqFromSchedInfo()
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
		"own_path_calls":        ownPathBits(),
		"by_cgroup":             cfg.byCgroup,
		"have_rdonly_cast":      haveKfunc("bpf_rdonly_cast"),
		"have_task_from_pid":    haveKfunc("bpf_task_from_pid") && haveKfunc("bpf_task_release"),
		"have_bpf_loop":         !kernelUserStacks && features.HaveProgramHelper(ebpf.PerfEvent, asm.FnLoop) == nil,
		"ring_wake_bytes":       uint64(ring / 2),
		"runq_from_sched_info":  k.runqSchedInfo,
		"preempt_count_at":      preemptCountAt(),
		"untraced_tgid":         untracedTgid,
		"miss_in_nmi":           cfg.missEvent != nil && cfg.missEvent.Type != unix.PERF_TYPE_SOFTWARE,
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
	if cfg.mode == modePIDs {
		spec.Maps["target_bytes"].MaxEntries = targetWords()
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

// unattached says whether program p stays detached: on_wakeup and
// on_wakeup_new where on_switch takes run-queue latency alone.
func (k *kernel) unattached(p *ebpf.Program) bool {
	return k.runqSchedInfo && (p == k.objs.OnWakeup || p == k.objs.OnWakeupNew)
}

// runqAtWakeup makes the programs time run-queue latency from the
// wake-up even where the kernel keeps its own account: tests set it to
// hold the two ways against each other.
var runqAtWakeup = false

// kernelUserStacks makes the samplers take user stacks by the kernel's
// walk (bpf_get_stack) instead of their own (walk_step in
// bpf/cacheheat.c): a test's knob, to hold the two against each other.
var kernelUserStacks = false

// untracedTgid makes the switch program ignore switches into this process
// from another, as some kernels do not trace every switch (replay_in in
// bpf/cacheheat.c): a test's knob, 0 otherwise.
var untracedTgid uint32

// runqFromSchedInfo says whether the running kernel keeps its own
// account of each task's run-queue wait (CONFIG_SCHED_INFO: struct
// sched_info's fields) and leads from a task to its CPU's run queue
// (CONFIG_FAIR_GROUP_SCHED: sched_entity.cfs_rq, cfs_rq.rq), which
// on_switch needs to take the latency at the switch-in alone (runq_in
// and sched_info_wait in bpf/cacheheat.c).
func runqFromSchedInfo() bool {
	return haveMembers(
		[2]string{"sched_info", "last_queued"}, [2]string{"sched_info", "run_delay"}, [2]string{"sched_info", "last_arrival"},
		[2]string{"sched_info", "pcount"},
		[2]string{"sched_entity", "cfs_rq"}, [2]string{"cfs_rq", "rq"}, [2]string{"rq", "clock"})
}

// preemptCountAt is how far this CPU's preempt count lies from its run
// queue in the kernel's per-CPU area (the BPF side's preempt_count_at),
// from the offsets of __preempt_count and runqueues in the per-CPU
// section of the kernel's BTF; 0 where either is missing (__preempt_count
// is x86's) or the run queue cannot be reached from a task.
func preemptCountAt() int64 {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0
	}
	var sec *btf.Datasec
	if spec.TypeByName(".data..percpu", &sec) != nil {
		return 0
	}
	off := map[string]int64{}
	for _, v := range sec.Vars {
		if name := v.Type.TypeName(); name == "__preempt_count" || name == "runqueues" {
			off[name] = int64(v.Offset)
		}
	}
	pc, ok1 := off["__preempt_count"]
	rq, ok2 := off["runqueues"]
	if !ok1 || !ok2 || !haveMembers([2]string{"sched_entity", "cfs_rq"}, [2]string{"cfs_rq", "rq"}, [2]string{"rq", "cpu"}) {
		return 0
	}
	return pc - rq
}

// haveMembers says whether the running kernel's BTF has each {struct,
// member} pair (haveMember).
func haveMembers(m ...[2]string) bool {
	for _, sm := range m {
		if !haveMember(sm[0], sm[1]) {
			return false
		}
	}
	return true
}

// haveKfunc says whether the running kernel's BTF has the kfunc name.
// Looked up once: the kernel's types are parsed on first use and cached.
func haveKfunc(name string) bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false
	}
	var fn *btf.Func
	return spec.TypeByName(name, &fn) == nil
}

// exactCounts says whether the BPF side's switch counts can stand in for
// reads of the software groups under cfg (counterGroup.tellable): it
// notes faults at cpu-clock samples too, so sampling is on, and the
// kernel has the migration flag it reads. Not under a simulated PMU's
// rotation, whose stand-ins take their enabled time from a software
// slot's as read (readCounters).
func exactCounts(cfg kernelConfig) bool {
	return cfg.sampleHz > 0 && len(cfg.rotated) == 0 && haveMember("task_struct", "sched_migrated")
}

// haveMember says whether the running kernel's BTF has struct name with
// member field (a BPF program's bpf_core_field_exists, seen from here).
func haveMember(name, field string) bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false
	}
	var st *btf.Struct
	if spec.TypeByName(name, &st) != nil {
		return false
	}
	for _, m := range st.Members {
		if m.Name == field {
			return true
		}
	}
	return false
}

// openCounters opens each counted event on each CPU, disabled, and puts it
// in its slot's PERF_EVENT_ARRAY for the programs to read. On each CPU the
// software events form one group, read at once (readCounters); hardware
// events stay alone, so that grouping never changes how they are
// scheduled or multiplexed.
func (k *kernel) openCounters() error {
	k.counters = make([][]*perfCounter, len(k.cfg.counted))
	k.groups = make([]counterGroup, len(k.cfg.cpus))
	k.reads = make([]groupRead, len(k.cfg.cpus))
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
	exact := exactCounts(k.cfg)
	for i := range k.groups {
		g := &k.groups[i]
		g.tellable = exact && len(g.slots) > 0
		for _, slot := range g.slots {
			g.tellable = g.tellable && tellable(k.cfg.counted[slot])
		}
		g.inPlace = inPlaceOf(g.slots, k.faultSlots)
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
		if k.unattached(a.prog) {
			continue
		}
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
		k.mux = newRotator(k.cfg.rotated, k.cfg.muxMasks, k.cfg.muxCounters, k.counters)
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
	if k.targetBytes == nil {
		m, err := k.objs.TargetBytes.Memory()
		if err != nil {
			return fmt.Errorf("mapping the target bytes: %w", err)
		}
		k.targetBytes = m
	}
	// One byte: the programs may be setting its neighbours (children
	// forked by targets) at the same time.
	if int64(pid) < int64(k.targetBytes.Size()) {
		if _, err := k.targetBytes.WriteAt([]byte{how}, int64(pid)); err != nil {
			return fmt.Errorf("adding pid %d to the target bytes: %w", pid, err)
		}
	}
	return nil
}

// targetWords sizes target_bytes: a byte for every process id up to
// pid_max, eight to an element (4 MiB at Linux's largest pid_max, 2^22);
// process ids past it, should pid_max be raised during a recording, fall
// back to the hash map.
func targetWords() uint32 {
	maxPID := 1 << 22
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 && n <= 1<<22 {
			maxPID = n
		}
	}
	return uint32(maxPID/8 + 1)
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
	errs = append(errs, k.samples.close())
	k.samples = nil
	errs = append(errs, k.objs.Close())
	return errors.Join(errs...)
}
