package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cacheheat/cacheheat/collector/symbolize"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// Defaults of record's options.
const (
	DefaultInterval   = time.Second
	MinInterval       = 10 * time.Millisecond
	DefaultSampleHz   = 99
	DefaultMissPeriod = 10007 // prime, so sampling does not lock onto a loop
	// FaultPeriod samples page-faults with stacks where no hardware miss
	// event can be sampled: one fault in 997 (prime), a modest cost even
	// in a storm of 10^6 faults/s, and enough samples to name the code
	// that faults.
	FaultPeriod = 997
	// AppMetricsGrace is how long a command that reports app metrics may
	// run past -d to write its final values before it is stopped.
	AppMetricsGrace = 1500 * time.Millisecond
)

// missEvents are the primary miss events sampled with stacks where the PMU
// has them, in order of preference.
var missEvents = []string{"LLC-load-misses", "cache-misses"}

// Options configure a recording.
type Options struct {
	Target Target
	// Events to measure; nil means DefaultEvents. Each is probed: what the
	// host cannot count is recorded as unsupported or denied.
	Events       []Event
	CPUs         []int // -C; empty: every online CPU
	Interval     time.Duration
	Duration     time.Duration // 0: until the targets exit or ctx ends
	SampleHz     int
	SamplePeriod uint64 // the miss event's sampling period (-c)
	Output       string
	// OnWindow is called after each window is written; it must return
	// quickly, the recorder waits for it.
	OnWindow func(*profile.Window, Status)
	// Sinks receive the header and every window in memory (WindowSink).
	Sinks []WindowSink
	// Warn receives one-line warnings (data lost, application metrics
	// unreadable, ...).
	Warn func(string)
	// Tool is the header's tool field, "cacheheat VERSION" (default
	// "cacheheat").
	Tool string
	// Funcs are functions whose calls are timed, with the calling task's
	// counters per call (--func); FuncEvents also keeps each call.
	Funcs      []FuncSpec
	FuncEvents bool
	// Note receives the one line that says how many requested events
	// this host cannot measure; nil drops it (record -q).
	Note func(string)
	// ByCgroup counts by cgroup v2 instead of by thread and takes no
	// stacks: windows have no processes or samples, and ExtrasSinks get
	// each cgroup's counts and latency histograms. With sinks, Output may
	// be empty: then no file is written.
	ByCgroup bool
	// BPFStats turns the kernel's BPF run-time accounting on while the
	// recorder runs, for WindowExtras.Programs.
	BPFStats bool
}

// Status is the recorder's progress, for the status line and the live view.
type Status struct {
	Elapsed time.Duration
	Windows int
	Samples uint64
	Drops   uint64
}

// Recorder runs one recording. Abort may be called from another goroutine
// (a second Ctrl-C) to end the file at once.
type Recorder struct {
	opts Options

	mu      sync.Mutex
	w       *profile.Writer
	cm      *command
	aborted bool
	statsOn bool // this recorder turned the kernel's BPF run-time stats on
}

// NewRecorder checks the options; Run does the work.
func NewRecorder(opts Options) (*Recorder, error) {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Interval < MinInterval {
		return nil, fmt.Errorf("interval %v is below the minimum of %v", opts.Interval, MinInterval)
	}
	if opts.Duration < 0 {
		return nil, fmt.Errorf("negative duration %v", opts.Duration)
	}
	if opts.SampleHz == 0 {
		opts.SampleHz = DefaultSampleHz
	}
	if opts.SamplePeriod == 0 {
		opts.SamplePeriod = DefaultMissPeriod
	}
	if opts.Output == "" && len(opts.Sinks) == 0 {
		return nil, errors.New("no output file")
	}
	if opts.Warn == nil {
		opts.Warn = func(string) {}
	}
	if opts.Tool == "" {
		opts.Tool = "cacheheat"
	}
	if err := CheckSampleRate(opts.SampleHz); err != nil {
		return nil, err
	}
	return &Recorder{opts: opts}, nil
}

// Abort ends the recording file without a trailer, leaving it readable up
// to its last complete window, and kills a command target's process group.
// The caller exits right after.
func (r *Recorder) Abort() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cm != nil {
		r.cm.kill()
	}
	if r.w == nil || r.aborted {
		return nil
	}
	r.aborted = true
	return r.w.Abort()
}

// Run records until the duration passes, every target exits or ctx is
// done (a signal), then finishes the file and releases every kernel
// object. It returns the trailer written.
func (r *Recorder) Run(ctx context.Context) (tr *profile.Trailer, err error) {
	o := r.opts
	if err := checkPrivileges(); err != nil {
		return nil, err
	}
	host, err := liveHost()
	if err != nil {
		return nil, fmt.Errorf("reading host: %w", err)
	}
	cpus, err := pickCPUs(host.Topology, o.CPUs)
	if err != nil {
		return nil, err
	}

	// Target: checked before anything is loaded.
	kc := kernelConfig{cpus: cpus, sampleHz: o.SampleHz, missPeriod: o.SamplePeriod, byCgroup: o.ByCgroup}
	var tgt = o.Target
	switch tgt.Kind {
	case profile.TargetPID:
		if err := checkPIDs(tgt.PIDs); err != nil {
			return nil, err
		}
		kc.mode, kc.pids = modePIDs, tgt.PIDs
	case profile.TargetCgroup:
		if tgt.Cgroup, err = resolveCgroupArg(tgt.Cgroup); err != nil {
			return nil, err
		}
		id, err := cgroupID(tgt.Cgroup)
		if err != nil {
			return nil, err
		}
		tgt.Cgroup = cgroupPath(tgt.Cgroup)
		kc.mode, kc.cgroupID, kc.cgroupLevel = modeCgroup, id, cgroupLevel(tgt.Cgroup)
	case profile.TargetAll:
		kc.mode = modeAll
	case profile.TargetCommand:
		kc.mode = modePIDs
	default:
		return nil, fmt.Errorf("unknown target kind %q", tgt.Kind)
	}

	// Events: every requested one is probed; measured ones get a slot.
	// The CPU decides the default events and the vendor encodings; with
	// events given, an unreadable /proc/cpuinfo only costs miss sampling.
	cpu, err := LiveCPU()
	if err != nil && (o.Events == nil || errors.Is(err, ErrUnknownPMU)) {
		return nil, err
	}
	evs := o.Events
	if evs == nil {
		evs = DefaultEvents(cpu)
	}
	var statuses []profile.EventStatus
	var unsupported []string
	for _, ev := range evs {
		st := ProbeEvent(ev)
		statuses = append(statuses, st)
		if st.Status == profile.StatusMeasured {
			kc.counted = append(kc.counted, ev)
		} else {
			unsupported = append(unsupported, ev.Name)
		}
	}
	if len(kc.counted) == 0 {
		return nil, fmt.Errorf("%w: none of the requested events can be measured here (%s): %s", ErrHost, strings.Join(unsupportedReasons(statuses), "; "), strings.Join(unsupported, ", "))
	}
	if len(unsupported) > 0 && o.Note != nil {
		mode := HostMode(statuses) + " mode: "
		o.Note(fmt.Sprintf("%s%d of %d events not measured: %s; 'cacheheat caps' says which and why", mode, len(unsupported), len(statuses), strings.Join(unsupportedReasons(statuses), "; ")))
	}
	// A simulated PMU with more events than counters rotates them, and
	// needs one counter that never rotates as the clock of their enabled
	// time: cpu-clock is added when the selection has none.
	if rotated, _, ref := muxPlan(kc.counted, cpu); len(rotated) > 0 && ref < 0 {
		clock, _ := LookupEvent("cpu-clock", cpu)
		kc.counted = append(kc.counted, clock)
		statuses = append(statuses, ProbeEvent(clock))
		o.Warn("cpu-clock added: the simulated PMU's rotation needs a counter that never rotates as its time reference")
	}
	kc.rotated, kc.muxCounters, kc.refSlot = muxPlan(kc.counted, cpu)
	if len(kc.rotated) > 0 {
		o.Warn(fmt.Sprintf("%s: %d events rotate over %d counters; their counts are scaled by enabled/running time", SimulatedWarning, len(kc.rotated), kc.muxCounters))
	} else if cpu.Simulated != "" {
		o.Warn(SimulatedWarning)
	}
	sampleEvs := [2]string{"cpu-clock", ""}
	for _, name := range missEvents {
		ev, err := LookupEvent(name, cpu)
		if err == nil && ProbeEvent(ev).Status == profile.StatusMeasured {
			kc.missEvent = &ev
			sampleEvs[slotMiss] = name
			break
		}
		// Without a hardware miss event the sampled slot takes page
		// faults, so a page-fault finding names the code that faults.
		if kc.missEvent == nil {
			ev, err := LookupEvent("page-faults", cpu)
			if err == nil && ProbeEvent(ev).Status == profile.StatusMeasured {
				kc.missEvent = &ev
				kc.missPeriod = FaultPeriod
				sampleEvs[slotMiss] = ev.Name
			}
		}
	}
	host.Mode = HostMode(statuses)

	// The command starts behind its gate before the programs load, so a
	// command that cannot start is a usage error with nothing loaded.
	var cm *command
	var am *appMetrics
	if tgt.Kind == profile.TargetCommand {
		uid, gid := -1, -1
		if c := sudoCredential(); c != nil {
			uid, gid = int(c.Uid), int(c.Gid)
		}
		am, err = newAppMetrics(o.Output, uid, gid)
		if err != nil {
			return nil, err
		}
		defer am.close()
		cm, err = startCommand(tgt.Command, []string{am.env()})
		if err != nil {
			return nil, err
		}
		tgt.PIDs = []int{cm.cmd.Process.Pid}
		kc.execPIDs = tgt.PIDs
		r.mu.Lock()
		r.cm = cm
		r.mu.Unlock()
		defer func() {
			if err != nil {
				cm.kill()
			}
		}()
	}

	k, err := openKernel(kc)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := k.close(); cerr != nil && err == nil {
			err = fmt.Errorf("releasing bpf objects: %w", cerr)
		}
	}()

	// Function probes attach before the command is released, so its
	// first call is timed.
	var fk *funcKernel
	if len(o.Funcs) > 0 {
		fc := funcConfig{specs: o.Funcs, target: tgt, events: o.FuncEvents, hwReason: funcHardwareReason(host.Mode)}
		switch tgt.Kind {
		case profile.TargetPID, profile.TargetCommand:
			fc.pids = tgt.PIDs
		case profile.TargetCgroup:
			fc.cgroupID, fc.cgroupLevel = kc.cgroupID, kc.cgroupLevel
		}
		if fk, err = openFuncs(fc); err != nil {
			return nil, err
		}
		defer func() {
			if cerr := fk.close(); cerr != nil && err == nil {
				err = fmt.Errorf("releasing function probes: %w", cerr)
			}
		}()
	}

	names := make([]string, len(kc.counted))
	for i, ev := range kc.counted {
		names[i] = ev.Name
	}
	settings := profile.Settings{
		IntervalNS: int64(o.Interval), DurationNS: int64(o.Duration),
		SampleHz: o.SampleHz, CPUs: o.CPUs,
		SampleEvents: []string{sampleEvs[slotClock]},
	}
	if kc.missEvent != nil {
		settings.SamplePeriod = kc.missPeriod
		settings.SampleEvents = append(settings.SampleEvents, sampleEvs[slotMiss])
	}
	// Indexing the targets' binaries can take a while: done before the
	// clock starts. A command's mappings are read once it has exec'd.
	sym := symbolize.New()
	// Goroutine stacks are walked for the processes named as targets
	// (-p, a command, and their children), not for every process of -a
	// or -G: each Go binary's DWARF is read once, and a whole host has
	// many.
	var gp *goProcs
	if tgt.Kind == profile.TargetPID || tgt.Kind == profile.TargetCommand {
		gp = newGoProcs()
	}
	if cm == nil {
		for _, pid := range tgt.PIDs {
			_ = sym.Snapshot(pid) // a process may exit at any time: resolved as [unknown]
			gp.add(k, pid)
		}
	}
	if o.BPFStats {
		stop, err := enableBPFStats()
		if err != nil {
			o.Warn(err.Error())
		} else {
			r.statsOn = true
			defer stop()
		}
	}
	start := time.Now()
	header := profile.Header{
		FormatVersion: profile.FormatVersion(),
		Tool:          o.Tool, StartTime: start, Host: host,
		Target: tgt.header(), Settings: settings, Events: statuses,
		PMU: SimulatedPMU(cpu),
	}
	if fk != nil {
		fk.startMono.Store(monoNow())
		header.Functions = fk.specs()
	}
	var w *profile.Writer
	if o.Output != "" {
		if w, err = profile.Create(o.Output, header); err != nil {
			return nil, err
		}
	}
	for _, s := range o.Sinks {
		s.Header(header)
	}
	r.mu.Lock()
	r.w = w
	r.mu.Unlock()

	rec := &run{
		k: k, sym: sym, am: am, goProcs: gp, kern: k,
		meta: windowMeta{
			events: names, sampleEvs: sampleEvs, sampleHz: o.SampleHz,
			ncpu: host.Topology.MaxCPU() + 1, sampled: len(cpus),
			allTasks: tgt.Kind == profile.TargetAll,
			procComm: procComm, procCmd: newCmdlines().get,
			stackTable: newStackTable(sym),
		},
		start: start,
	}
	rec.meta.procContainer = (&procContainers{}).get
	if o.ByCgroup {
		rec.cgNames = newCgroupNames(cgroup2Mount())
		// Counting by cgroup, windows carry no processes: nothing is read
		// from /proc per process and window.
		rec.meta.procComm, rec.meta.procCmd, rec.meta.procContainer = nil, nil, nil
	}
	// The first snapshot is taken before a command starts, so that none of
	// its counts can land between the snapshot's reads of the task map and
	// of the per-CPU totals.
	if rec.prev, err = k.snapshot(); err != nil {
		return nil, err
	}
	if fk != nil {
		// The function maps start at zero when loaded, before the command
		// is released: a snapshot taken now would hide its first calls.
		rec.fk, rec.fprev = fk, fk.zeroSnap()
	}
	if cm != nil {
		if err := cm.release(); err != nil {
			return nil, err
		}
	}

	exited := make(chan struct{})
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	switch {
	case cm != nil:
		go func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-cm.done:
					close(exited)
					return
				case <-stopWatch:
					return
				case <-t.C:
					_ = sym.Snapshot(cm.cmd.Process.Pid)
					gp.add(k, cm.cmd.Process.Pid)
				}
			}
		}()
	case tgt.Kind == profile.TargetPID:
		go watchPIDs(k, sym, gp, exited, stopWatch)
	}

	end := profile.EndSignal
	var deadline <-chan time.Time
	if o.Duration > 0 {
		dt := time.NewTimer(o.Duration)
		defer dt.Stop()
		deadline = dt.C
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
loop:
	for {
		select {
		case <-tick.C:
			if err := r.closeWindow(rec, false); err != nil {
				return nil, err
			}
			// A duration that is a multiple of the interval ends with a
			// full window, not a sliver.
			if o.Duration > 0 && time.Since(start) >= o.Duration-o.Interval/100 {
				end = profile.EndDuration
				break loop
			}
		case <-deadline:
			end = profile.EndDuration
			break loop
		case <-exited:
			end = profile.EndTargetExit
			// The exiting task's last context switch, which attributes
			// its final counts, may still be running on another CPU.
			time.Sleep(20 * time.Millisecond)
			break loop
		case <-ctx.Done():
			end = profile.EndSignal
			break loop
		}
	}
	if err := r.closeWindow(rec, true); err != nil {
		return nil, err
	}

	trailer := profile.Trailer{EndReason: end, EndTime: time.Now(), Drops: rec.drops, Windows: rec.windows}
	finished := end == profile.EndTargetExit
	if cm != nil && am != nil && end == profile.EndDuration {
		// A command that reports metrics writes its final values as it
		// ends, usually just after -d (it started a little later): give
		// it a moment, so the recording keeps the run's own values.
		select {
		case <-cm.done:
			finished = true
		case <-time.After(AppMetricsGrace):
		}
	}
	if cm != nil {
		// The recording is over; so is the command, as with perf stat
		// --timeout, and whatever it left running in its process group:
		// SIGTERM, a moment to finish, then SIGKILL.
		cm.stop(CommandGrace)
		st, sig := cm.exitStatus()
		trailer.ExitStatus, trailer.ExitSignal = &st, sig
	}
	if msg := rec.stretch.warning(rec.windows); msg != "" {
		trailer.Warnings = append(trailer.Warnings, msg)
		o.Warn(msg)
	}
	if am != nil {
		am.poll(true) // what the command wrote up to its end
		trailer.AppMetrics = am.final
		trailer.AppMetricsPartial = !finished && len(am.final) > 0
		if msg := am.warning(); msg != "" {
			trailer.Warnings = append(trailer.Warnings, msg)
			o.Warn(msg)
		}
	}
	if f := rec.flost; f.unmatched+f.inflightFull+f.eventsDropped > 0 {
		msg := fmt.Sprintf("function calls not timed: %d returns without their entry (in-flight map full or entered before recording), %d entries not stored; %d per-call events dropped", f.unmatched, f.inflightFull, f.eventsDropped)
		trailer.Warnings = append(trailer.Warnings, msg)
		o.Warn(msg)
	}
	if d := rec.drops; d.Total() > 0 {
		trailer.Warnings = append(trailer.Warnings, fmt.Sprintf("data lost: %d stack errors, %d samples (sample map full), %d counter deltas (task map full), %d other map errors", d.StackErrors, d.SampleMapFull, d.ProcMapFull, d.MapErrors))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.aborted || w == nil {
		return &trailer, nil
	}
	if err := w.Close(trailer); err != nil {
		return nil, err
	}
	r.w = nil
	return &trailer, nil
}

// run is the state carried from window to window.
type run struct {
	k       source
	sym     *symbolize.Symbolizer
	am      *appMetrics
	goProcs *goProcs
	kern    *kernel // nil in tests that fabricate snapshots
	meta    windowMeta
	prev    *snapshot
	start   time.Time
	lastNS  int64
	samples uint64
	drops   profile.Drops
	windows int
	stretch stretchCount
	fk      *funcKernel // nil without --func
	fprev   *funcSnap
	flost   struct{ unmatched, inflightFull, eventsDropped uint64 }
	cgNames *cgroupNames // by-cgroup mode
}

// closeWindow drains the kernel, writes one window and reports it. The last
// window of a recording is written only when it is not empty of time.
func (r *Recorder) closeWindow(rc *run, last bool) error {
	now := time.Now()
	endNS := now.Sub(rc.start).Nanoseconds()
	samples, lost, err := rc.k.drainSamples()
	if err != nil {
		return err
	}
	cur, err := rc.k.snapshot()
	if err != nil {
		return err
	}
	var funcs []profile.FunctionWindow
	var fcur *funcSnap
	calls := false
	if rc.fk != nil {
		if fcur, err = rc.fk.snapshot(); err != nil {
			return err
		}
		funcs = rc.fk.window(rc.fprev, fcur, endNS)
		for _, f := range funcs {
			rc.flost.unmatched += f.Unmatched
			rc.flost.inflightFull += f.InflightFull
			rc.flost.eventsDropped += f.EventsDropped
			calls = calls || len(f.Buckets) > 0 || f.Entries > 0 || f.Unmatched > 0
		}
	}
	if last && endNS-rc.lastNS < int64(time.Millisecond) && len(samples) == 0 && !calls {
		return nil
	}
	// Mappings of a process sampled are read now, while it may still run,
	// when they were never read or no longer cover its stacks.
	addrs := map[int][]uint64{}
	for _, s := range samples {
		if len(s.user) > 0 {
			addrs[s.pid] = append(addrs[s.pid], s.user...)
		}
	}
	for pid, a := range addrs {
		if rc.sym.NeedsSnapshot(pid, a) {
			_ = rc.sym.Snapshot(pid)
		}
		if rc.kern != nil && rc.goProcs != nil {
			rc.goProcs.add(rc.kern, pid)
		}
	}
	m := rc.meta
	m.startNS, m.endNS = rc.lastNS, endNS
	if !last {
		rc.stretch.add(endNS-rc.lastNS, int64(r.opts.Interval))
	}
	win := buildWindow(rc.prev, cur, samples, lost, m)
	if rc.kern != nil {
		win.Others = rc.kern.drainOthers()
	}
	if r.opts.ByCgroup {
		win.Processes = nil
	}
	win.Functions = funcs
	if fcur != nil {
		rc.fprev = fcur
	}
	if rc.am != nil {
		win.AppMetrics = rc.am.poll(last)
	}
	x, err := r.windowExtras(rc, cur, win)
	if err != nil {
		return err
	}
	rc.prev, rc.lastNS = cur, endNS
	for _, s := range win.Samples {
		rc.samples += s.Count
	}
	rc.drops.Add(win.Drops)

	r.mu.Lock()
	if r.aborted {
		r.mu.Unlock()
		return nil
	}
	if r.w != nil {
		err = r.w.WriteWindow(win)
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	rc.windows++
	st := Status{Elapsed: now.Sub(rc.start), Windows: rc.windows, Samples: rc.samples, Drops: rc.drops.Total()}
	if r.opts.OnWindow != nil {
		r.opts.OnWindow(win, st)
	}
	for _, s := range r.opts.Sinks {
		if xs, ok := s.(ExtrasSink); ok && x != nil {
			xs.Extras(x)
		}
		s.Window(win, st)
	}
	return nil
}

// watchPIDs closes exited when every process in the target set has
// exited, and keeps the symbolizer's view of their mappings fresh.
func watchPIDs(k *kernel, sym *symbolize.Symbolizer, gp *goProcs, exited, stop chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		pids, err := k.targetPIDs()
		if err != nil {
			continue
		}
		any := false
		for _, pid := range pids {
			if alive(pid) {
				any = true
				_ = sym.Snapshot(pid)
				gp.add(k, pid)
			}
		}
		if !any {
			close(exited)
			return
		}
	}
}

// pickCPUs returns the online CPUs to record on: all, or the -C list,
// which must name online CPUs.
func pickCPUs(t profile.Topology, want []int) ([]int, error) {
	var online []int
	for _, c := range t.CPUs {
		online = append(online, c.ID)
	}
	if len(want) == 0 {
		return online, nil
	}
	for _, c := range want {
		if !slices.Contains(online, c) {
			return nil, fmt.Errorf("%w: cpu %d is not online (online: %s)", ErrNoTarget, c, host.FormatCPUList(online))
		}
	}
	return want, nil
}

func procComm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func procCmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// cmdlines caches each process's command line while its name stays the
// same: an exec renames it, so /proc is read once per process and program
// rather than every window. A process that exits keeps the last one read.
type cmdlines struct {
	m map[int]cmdline
}

type cmdline struct {
	comm string
	argv []string
}

func newCmdlines() *cmdlines { return &cmdlines{m: map[int]cmdline{}} }

func (c *cmdlines) get(pid int, comm string) []string {
	if e, ok := c.m[pid]; ok && e.comm == comm {
		return e.argv
	}
	if len(c.m) >= 1<<16 {
		clear(c.m) // a long recording of a busy host: start over
	}
	argv := procCmdline(pid)
	if argv == nil {
		if e, ok := c.m[pid]; ok {
			return e.argv
		}
		return nil
	}
	c.m[pid] = cmdline{comm: comm, argv: argv}
	return argv
}
