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

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
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
	// Output is the recording file: NewRecorder puts FileSink(Output)
	// first in Sinks.
	Output string
	// Sinks receive the header, every window and the end (Sink): the
	// file, the live view, the status line, the exporter.
	Sinks []Sink
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
	// stacks: windows have no processes or samples, and sinks get
	// each cgroup's counts and latency histograms. With sinks, Output may
	// be empty: then no file is written.
	ByCgroup bool
	// BPFStats turns the kernel's BPF run-time accounting on while the
	// recorder runs, for WindowExtras.Programs.
	BPFStats bool
	// CPU is this host's CPU (LiveCPU) when the caller has read it
	// already, to look Events up; nil: Run reads it.
	CPU *host.CPUInfo
	// Runs runs a command target this many times, one after the other,
	// after Warmup runs more (record -r, --warmup); each run's totals
	// are kept (profile.RunTotal). 0 or 1 with no warm-up: one run, as
	// before, without run totals.
	Runs, Warmup int
	// NoLines leaves the source lines of the sampled addresses to
	// whoever reads the file (record --no-lines); by default they are
	// resolved when the recording ends and kept in its trailer.
	NoLines bool
	// QuietMax is the longest a recorder of a target that does nothing
	// sleeps before it writes a window (quiet.go; record --quiet-max).
	// 0: a window every interval.
	QuietMax time.Duration
}

// Status is the recorder's progress, for the status line and the live view.
type Status struct {
	Elapsed time.Duration
	Windows int
	Samples uint64
	Drops   uint64
	// Quiet: the target did nothing in the window just written, and the
	// recorder takes no other until it runs (or QuietMax passes).
	Quiet bool
}

// Recorder runs one recording. Abort may be called from another goroutine
// (a second Ctrl-C) to end the file at once.
type Recorder struct {
	opts Options

	// mu orders the sinks' calls with Abort: begun says they have had
	// the header, closed that they were closed (the end, or Abort).
	mu     sync.Mutex
	begun  bool
	closed bool
	cm     *command
	// cleanup holds what a command target leaves to clean up: its
	// cgroup, its metrics file, and the reaper that cleans them up if the
	// recorder dies first.
	cleanup cleanup
	statsOn bool // this recorder turned the kernel's BPF run-time stats on
}

// NewRecorder checks the options and fills in their defaults; Run does
// the work. It is the one place the options are checked: a command line
// only parses them.
func NewRecorder(opts Options) (*Recorder, error) {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.SampleHz == 0 {
		opts.SampleHz = DefaultSampleHz
	}
	if opts.SamplePeriod == 0 {
		opts.SamplePeriod = DefaultMissPeriod
	}
	if opts.Warn == nil {
		opts.Warn = func(string) {}
	}
	if opts.Tool == "" {
		opts.Tool = "cacheheat"
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	var note string
	if opts.SampleHz, note = ClampSampleRate(opts.SampleHz); note != "" {
		opts.Warn(note)
	}
	if opts.Output != "" {
		opts.Sinks = append([]Sink{FileSink(opts.Output)}, opts.Sinks...)
	}
	return &Recorder{opts: opts}, nil
}

// check refuses options no recording can be made with; errors name the
// command line flag, which is how most people set them.
func (o Options) check() error {
	switch {
	case o.Interval < MinInterval:
		return fmt.Errorf("-i %v: want an interval of at least %v, such as 1s or 100ms", o.Interval, MinInterval)
	case o.Duration < 0:
		return fmt.Errorf("-d %v: want a positive duration such as 10s or 2m", o.Duration)
	case o.SampleHz < 0:
		return fmt.Errorf("-F %d: want a positive frequency", o.SampleHz)
	case o.Output == "" && len(o.Sinks) == 0:
		return errors.New("no output file")
	case o.Runs < 0:
		return fmt.Errorf("-r %d: want a number of runs, 1 or more", o.Runs)
	case o.Warmup < 0:
		return fmt.Errorf("--warmup %d: want a number of runs, 0 or more", o.Warmup)
	case o.QuietMax < 0 || (o.QuietMax > 0 && o.QuietMax < o.Interval):
		// Shorter than a window, a quiet window would end before the
		// window it replaces: a recorder woken more often, not less.
		return fmt.Errorf("--quiet-max %v: want a duration of at least the interval (%v), such as 1m, or 0 for a window every interval", o.QuietMax, o.Interval)
	case o.repeated() && len(o.Target.Command) == 0:
		return fmt.Errorf("-r and --warmup repeat a command: give one after --")
	}
	return nil
}

// repeated says whether the command runs more than once, with run totals.
func (o Options) repeated() bool { return o.Runs > 1 || o.Warmup > 0 }

// setCommand makes c the command Abort kills: the run going now.
func (r *Recorder) setCommand(c *command) {
	r.mu.Lock()
	r.cm = c
	r.mu.Unlock()
	r.cleanup.reaper.tell("pgid", strconv.Itoa(c.cmd.Process.Pid))
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
	r.cleanup.run()
	if !r.begun || r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, s := range r.opts.Sinks {
		errs = append(errs, s.Close(nil))
	}
	return errors.Join(errs...)
}

// Run records until the duration passes, every target exits or ctx is
// done (a signal), then finishes the file and releases every kernel
// object. It returns the trailer written.
//
// A recording is a pipeline of stages: plan (host, target, events;
// nothing loaded yet), start the command, open the kernel side, begin
// (header, file, first snapshot), then one window per interval (drain,
// build, write: closeWindow) until the end, and finish (trailer).
func (r *Recorder) Run(ctx context.Context) (tr *profile.Trailer, err error) {
	p, err := r.makePlan()
	if err != nil {
		return nil, err
	}
	// The command starts behind its gate before the programs load, so a
	// command that cannot start is a usage error with nothing loaded.
	var cm *command
	var am *appMetrics
	if len(p.target.Command) > 0 {
		if cm, am, err = r.startCommandTarget(p); err != nil {
			return nil, err
		}
		defer r.cleanup.run()
		defer func() {
			if err != nil {
				cm.kill()
			}
		}()
	}
	k, err := openKernel(p.kc)
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
	fk, err := r.openFuncProbes(p)
	if err != nil {
		return nil, err
	}
	if fk != nil {
		defer func() {
			if cerr := fk.close(); cerr != nil && err == nil {
				err = fmt.Errorf("releasing function probes: %w", cerr)
			}
		}()
	}
	if r.opts.BPFStats {
		stop := r.startBPFStats()
		defer stop()
	}
	rec, err := r.begin(p, k, fk, cm, am)
	if err != nil {
		return nil, err
	}
	defer rec.mmaps.close()
	exited := make(chan struct{})
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	switch {
	case cm != nil && r.opts.repeated():
		rec.runner = newRunner(r, p, k, rec, cm, []string{am.env()})
		go rec.runner.loop(exited, stopWatch)
	case cm != nil:
		rec.windowDone = make(chan uint64, 1)
		go watchCommand(cm, k, rec.sym, rec.goProcs, rec.mmaps != nil, rec.windowDone, exited, stopWatch)
	case p.target.Kind == profile.TargetPID:
		rec.windowDone = make(chan uint64, 1)
		go watchPIDs(k, rec.sym, rec.goProcs, rec.mmaps != nil, rec.windowDone, exited, stopWatch)
	}
	// The recorder's timed wake-ups may come a thousandth of a window late
	// (slack.go). Without CAP_SYS_NICE they stay as they were: only its
	// cost depends on it, never what it records.
	_ = setTimerSlack(windowSlack(r.opts.Interval))
	end, err := r.loop(ctx, rec, exited)
	if err != nil {
		return nil, err
	}
	return r.finish(rec, end, cm, am)
}

// startCommandTarget starts a command target behind its gate, with the file
// through which it may report application metrics, and makes its process
// the target.
func (r *Recorder) startCommandTarget(p *plan) (*command, *appMetrics, error) {
	cl := &r.cleanup
	var err error
	if cl.reaper, err = startReaper(); err != nil {
		r.opts.Warn(fmt.Sprintf("%v: if the recorder is killed (kill -9), the command and its metrics file outlive it", err))
	}
	if cl.tree, err = newTree(); err != nil {
		r.opts.Warn(fmt.Sprintf("no cgroup for the command (%v): what it starts that leaves its process group (setsid) can outlive the recording", err))
	} else {
		cl.reaper.tell("cgroup", cl.tree.dir)
	}
	uid, gid := -1, -1
	if c := sudoCredential(); c != nil {
		uid, gid = int(c.Uid), int(c.Gid)
	}
	am, err := newAppMetrics(r.opts.Output, uid, gid)
	if err != nil {
		cl.run()
		return nil, nil, err
	}
	cl.am = am
	cl.reaper.tell("file", am.path)
	cm, err := startCommand(p.target.Command, []string{am.env()}, cl.tree)
	if err != nil {
		cl.run()
		return nil, nil, err
	}
	// Under -a the command is what decides when the recording ends, not
	// a target: every task is.
	if p.target.Kind == profile.TargetCommand {
		p.target.PIDs = []int{cm.cmd.Process.Pid}
		p.kc.execPIDs = p.target.PIDs
	}
	r.setCommand(cm)
	return cm, am, nil
}

// cleanup is what a command target leaves behind: its cgroup and its
// metrics file, and the reaper process that removes them if the recorder
// cannot.
type cleanup struct {
	once   sync.Once
	tree   *tree
	am     *appMetrics
	reaper *reaper
}

// run removes the cgroup (ending anything left in it) and the metrics
// file, then lets the reaper go. Once: Abort and Run's end may both call
// it.
func (c *cleanup) run() {
	c.once.Do(func() {
		c.tree.remove()
		if c.am != nil {
			c.am.close()
		}
		c.reaper.done()
	})
}

// openFuncProbes attaches the --func probes, limited to the target; nil
// without --func.
func (r *Recorder) openFuncProbes(p *plan) (*funcKernel, error) {
	if len(r.opts.Funcs) == 0 {
		return nil, nil
	}
	fc := funcConfig{specs: r.opts.Funcs, target: p.target, events: r.opts.FuncEvents, hwReason: funcHardwareReason(p.host.Mode)}
	switch p.target.Kind {
	case profile.TargetPID, profile.TargetCommand:
		fc.pids = p.target.PIDs
	case profile.TargetCgroup:
		fc.cgroupID, fc.cgroupLevel = p.kc.cgroupID, p.kc.cgroupLevel
	}
	return openFuncs(fc)
}

// startBPFStats turns the kernel's BPF run-time accounting on for the
// recording and returns what turns it off. Without it the recording goes
// on, with a warning: only the run times are missing.
func (r *Recorder) startBPFStats() (stop func()) {
	stop, err := enableBPFStats()
	if err != nil {
		r.opts.Warn(err.Error())
		return func() {}
	}
	r.statsOn = true
	return stop
}

// begin writes the header to the file and the sinks, takes the first
// snapshot and releases the command: from here on, windows are made.
func (r *Recorder) begin(p *plan, k *kernel, fk *funcKernel, cm *command, am *appMetrics) (*run, error) {
	o := r.opts
	rec := newRun(p, k, o.ByCgroup)
	rec.am = am
	rec.quietMax = o.quietMax(p)
	if o.Output != "" && !o.NoLines {
		rec.meta.stackTable.lines = symbolize.NewLineRequests()
	}
	if !o.ByCgroup {
		// Mappings are followed from before the command is released, so
		// its exec and first maps are seen; and from before the targets'
		// /proc is read, so that a process is either read there or seen
		// starting (snapshotRunning).
		cg := ""
		if p.target.Kind == profile.TargetCgroup {
			cg = p.target.Cgroup
		}
		keep := mmapKeep(p, k)
		mw, err := newMmapWatcher(p.cpus, rec.sym, keep, cg)
		if err != nil {
			o.Warn(fmt.Sprintf("%v: processes that exit within a window may be left unnamed", err))
		} else {
			rec.mmaps = mw
			mw.start()
			if p.target.Kind != profile.TargetCommand {
				snapshotRunning(rec.sym, keep)
			}
		}
	}
	// Indexing the targets' binaries can take a while: done before the
	// clock starts (by snapshotRunning, which reads every target, when
	// the watcher runs). A command's mappings are read once it has exec'd.
	if cm == nil {
		for _, pid := range p.target.PIDs {
			if rec.mmaps == nil {
				_ = rec.sym.Snapshot(pid) // a process may exit at any time: resolved as [unknown]
			}
			rec.goProcs.add(k, pid)
		}
	}
	var startMono int64
	rec.start, startMono = clockPair()
	header := r.header(p, rec.start)
	if fk != nil {
		fk.startMono.Store(startMono)
		header.Functions = fk.specs()
	}
	r.mu.Lock()
	for _, s := range o.Sinks {
		if err := s.Header(header); err != nil {
			r.mu.Unlock()
			return nil, err
		}
	}
	r.begun = true
	r.mu.Unlock()
	var err error
	// The first snapshot is taken before a command starts, so that none of
	// its counts can land between the snapshot's reads of the task map and
	// of the per-CPU totals.
	if rec.prev, err = k.snapshot(true); err != nil {
		return nil, err
	}
	if fk != nil {
		// The function maps start at zero when loaded, before the command
		// is released: a snapshot taken now would hide its first calls.
		rec.fk, rec.fprev = fk, fk.zeroSnap()
	}
	if cm != nil {
		rec.goProcs.addCommand(k, cm.cmd.Process.Pid, cm.path)
		if err := cm.release(); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// mmapKeep says which processes' mappings the recorder follows: every
// process under -a, a target's (and its children's, added at fork) under
// -p and for a command, a process of the target cgroup or below under -G.
func mmapKeep(p *plan, k *kernel) func(pid int) bool {
	switch p.target.Kind {
	case profile.TargetAll:
		return nil
	case profile.TargetCgroup:
		prefix := strings.TrimSuffix(p.target.Cgroup, "/")
		return func(pid int) bool {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
			if err != nil {
				return false
			}
			for _, line := range strings.Split(string(b), "\n") {
				if cg, ok := strings.CutPrefix(line, "0::"); ok {
					return cg == prefix || strings.HasPrefix(cg, prefix+"/")
				}
			}
			return false
		}
	}
	return func(pid int) bool {
		var v uint8
		return k.objs.Targets.Lookup(uint32(pid), &v) == nil
	}
}

// header describes the recording about to start.
func (r *Recorder) header(p *plan, start time.Time) profile.Header {
	o := r.opts
	settings := profile.Settings{
		IntervalNS: int64(o.Interval), DurationNS: int64(o.Duration),
		SampleHz: o.SampleHz, CPUs: o.CPUs,
		SampleEvents: []string{p.sampleEvs[slotClock]},
	}
	if p.kc.missEvent != nil {
		settings.SamplePeriod = p.kc.missPeriod
		settings.SampleEvents = append(settings.SampleEvents, p.sampleEvs[slotMiss])
	}
	return profile.Header{
		FormatVersion: profile.FormatVersion(),
		Tool:          o.Tool, StartTime: start, Host: p.host,
		Target: p.target.header(), Settings: settings, Events: p.statuses,
		HostEvents: p.hostEvents,
		PMU:        SimulatedPMU(p.cpu),
	}
}

// newRun is the state of a recording's windows, before its first
// snapshot.
func newRun(p *plan, k *kernel, byCgroup bool) *run {
	names := make([]string, len(p.kc.counted))
	for i, ev := range p.kc.counted {
		names[i] = ev.Name
	}
	sym := symbolize.New()
	rec := &run{
		k: k, kern: k, sym: sym,
		meta: windowMeta{
			events: names, sampleEvs: p.sampleEvs, sampleHz: p.kc.sampleHz,
			ncpu: p.host.Topology.MaxCPU() + 1, sampled: len(p.cpus),
			allTasks: p.target.Kind == profile.TargetAll,
			procComm: procComm, procCmd: newCmdlines().get,
			procContainer: (&procContainers{}).get,
			stackTable:    newStackTable(sym),
		},
	}
	// Goroutine stacks are walked for the processes named as targets
	// (-p, a command, and their children), not for every process of -a
	// or -G: each Go binary's DWARF is read once, and a whole host has
	// many.
	if p.target.Kind == profile.TargetPID || p.target.Kind == profile.TargetCommand {
		rec.goProcs = newGoProcs()
	}
	if byCgroup {
		rec.cgNames = newCgroupNames(cgroup2Mount())
		// Counting by cgroup, windows carry no processes: nothing is read
		// from /proc per process and window.
		rec.meta.noProcesses = true
		rec.meta.procComm, rec.meta.procCmd, rec.meta.procContainer = nil, nil, nil
	}
	return rec
}

// loop closes a window every interval until the recording ends, and says
// why it ended (profile.End*).
func (r *Recorder) loop(ctx context.Context, rec *run, exited <-chan struct{}) (string, error) {
	o := r.opts
	var deadline <-chan time.Time
	if o.Duration > 0 {
		dt := time.NewTimer(o.Duration)
		defer dt.Stop()
		deadline = dt.C
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	// While the recorder sleeps through a quiet window (quiet.go) the
	// ticker is stopped, and the target's wake record (woke) or QuietMax
	// (quietEnd) ends the window; both are nil otherwise.
	var woke <-chan struct{}
	var quietEnd <-chan time.Time
	quietTimer := time.NewTimer(time.Hour)
	quietTimer.Stop()
	defer quietTimer.Stop()
	for {
		rec.woken = false
		select {
		case <-tick.C:
		case <-woke:
			rec.woken = true
		case <-quietEnd:
		case <-deadline:
			return profile.EndDuration, nil
		case <-exited:
			// The exiting task's last context switch, which attributes
			// its final counts, may still be running on another CPU.
			time.Sleep(20 * time.Millisecond)
			return profile.EndTargetExit, nil
		case <-ctx.Done():
			return profile.EndSignal, nil
		}
		if err := r.closeWindow(rec, false); err != nil {
			return "", err
		}
		// A duration that is a multiple of the interval ends with a full
		// window, not a sliver.
		if o.Duration > 0 && time.Since(rec.start) >= o.Duration-o.Interval/100 {
			return profile.EndDuration, nil
		}
		switch {
		case rec.quiet:
			if !rec.sleeping {
				tick.Stop()
				rec.kern.samples.clearWake() // one sent since the last sleep
				woke, rec.sleeping = rec.kern.samples.woke, true
			}
			if err := rec.kern.armWake(); err != nil {
				return "", err
			}
			quietTimer.Reset(rec.quietMax)
			quietEnd = quietTimer.C
		case rec.sleeping:
			quietTimer.Stop()
			woke, quietEnd, rec.sleeping = nil, nil, false
			tick.Reset(o.Interval)
		}
	}
}

// finish closes the last window, stops a command target and ends the file
// with the trailer, which says why the recording ended and what was lost.
func (r *Recorder) finish(rec *run, end string, cm *command, am *appMetrics) (*profile.Trailer, error) {
	if rec.runner != nil {
		rec.runner.stop() // no run starts after this; one going is cut short
	}
	if err := r.closeWindow(rec, true); err != nil {
		return nil, err
	}
	tr := profile.Trailer{EndReason: end, EndTime: time.Now(), Drops: rec.drops, Windows: rec.windows}
	finished := end == profile.EndTargetExit
	if rec.runner != nil {
		cm = rec.runner.current()
	}
	if cm != nil {
		finished = stopCommand(cm, am, end, &tr) || finished
		r.cleanup.reaper.tell("pgid", "0") // gone: the number may be reused
	}
	if rec.runner != nil {
		tr.Runs = rec.runner.count()
		if msg, status := rec.runner.finish(); msg != "" {
			tr.Warnings = append(tr.Warnings, msg)
			r.opts.Warn(msg)
			if status != 0 {
				tr.RunsFailed = msg
			}
		}
	}
	// The last window, which may be cut short, is not judged, but counted.
	st := rec.stretch
	st.Windows = rec.windows
	if msg := st.String(); msg != "" {
		tr.Warnings = append(tr.Warnings, msg)
		r.opts.Warn(msg)
	}
	if am != nil {
		am.poll(true) // what the command wrote up to its end
		tr.AppMetrics = am.final
		tr.AppMetricsPartial = !finished && len(am.final) > 0
		if msg := am.warning(); msg != "" {
			tr.Warnings = append(tr.Warnings, msg)
			r.opts.Warn(msg)
		}
	}
	if f := rec.flost; f.unmatched+f.inflightFull+f.eventsDropped > 0 {
		msg := fmt.Sprintf("function calls not timed: %d returns without their entry (in-flight map full or entered before recording), %d entries not stored; %d per-call events dropped", f.unmatched, f.inflightFull, f.eventsDropped)
		tr.Warnings = append(tr.Warnings, msg)
		r.opts.Warn(msg)
	}
	if q := rec.meta.stackTable.lines; q != nil {
		tr.Lines = q.Resolve("/")
		if q.Dropped > 0 {
			tr.Warnings = append(tr.Warnings, fmt.Sprintf("source lines of %d sampled addresses not kept in the recording (more than %d): they are read from the binaries when the recording is read", q.Dropped, symbolize.MaxLineRequests))
		}
		if len(q.TooLarge) > 0 {
			tr.Warnings = append(tr.Warnings, fmt.Sprintf("source lines of %d files not kept in the recording (their debug information is too large to read beside the target): they are read from the binaries when the recording is read: %s", len(q.TooLarge), strings.Join(q.TooLarge, ", ")))
		}
	}
	if msg := untracedWarning(rec.prev, rec.kern); msg != "" {
		tr.Warnings = append(tr.Warnings, msg)
		r.opts.Warn(msg)
	}
	if d := rec.drops; d.Total() > 0 {
		tr.Warnings = append(tr.Warnings, "data lost: "+d.String())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || !r.begun {
		return &tr, nil
	}
	r.closed = true // a late Abort has nothing to end
	for _, s := range r.opts.Sinks {
		if err := s.Close(&tr); err != nil {
			return nil, err
		}
	}
	return &tr, nil
}

// untracedWarning says what a recording lost to switches the kernel's
// sched_switch tracepoint did not show (replay_in in bpf/cacheheat.c), or
// "": the software counts of a replayed slice are whole, its hardware
// counts are not attributed; a slice that could not be replayed is not
// counted at all up to the thread's next switch or sample, nor, under -a,
// that of a thread that left the CPU untraced when a hardware event's
// sample (an NMI) found the replay.
func untracedWarning(s *snapshot, k *kernel) string {
	if s == nil || k == nil {
		return ""
	}
	var parts []string
	if s.unseenIn > 0 && k.nrCounters > 0 {
		parts = append(parts, fmt.Sprintf("the hardware counts of the target's threads around %d switches the kernel did not trace are not attributed (their software counts were replayed from its scheduler account)", s.unseenIn))
	}
	if s.unseenLost > 0 {
		parts = append(parts, fmt.Sprintf("%d slices of the target's threads around switches the kernel did not trace are not counted (a thread that came in and left again untraced before any switch or sample of it, known from the kernel's count of its switch-ins, with the wait its switch-in ended; without the kernel's scheduler account, CONFIG_SCHED_INFO, a slice is counted only from its next switch or sample; the slice of a thread that left the CPU untraced is lost when a hardware event's sample finds the thread that came in)", s.unseenLost))
	}
	return strings.Join(parts, "; ")
}

// stopCommand ends a command target with the recording, as perf stat
// --timeout does, and puts its exit status in the trailer. It says
// whether the command finished on its own.
func stopCommand(cm *command, am *appMetrics, end string, tr *profile.Trailer) (finished bool) {
	if am != nil && end == profile.EndDuration {
		// A command that reports metrics writes its final values as it
		// ends, usually just after -d (it started a little later): give
		// it a moment, so the recording keeps the run's own values.
		select {
		case <-cm.done:
			finished = true
		case <-time.After(AppMetricsGrace):
		}
	}
	// Whatever it left running, in its process group or its cgroup, goes
	// too: SIGTERM, a moment to finish, then SIGKILL.
	cm.stop(CommandGrace)
	st, sig := cm.exitStatus()
	tr.ExitStatus, tr.ExitSignal = &st, sig
	return finished
}

// run is the state carried from window to window.
type run struct {
	// windowDone hears of each window closed, without waiting, with the
	// target changes counted by then (stats target_changes; the -p and
	// command watchers look at the targets then: see watchPIDs and
	// watchCommand); nil: nobody.
	windowDone chan uint64
	k          source
	sym        *symbolize.Symbolizer
	am         *appMetrics
	goProcs    *goProcs
	kern       *kernel // nil in tests that fabricate snapshots
	meta       windowMeta
	prev       *snapshot
	start      time.Time
	lastNS     int64
	samples    uint64
	drops      profile.Drops
	windows    int
	stretch    profile.Stretch // the windows but the last
	// quietMax is Options.QuietMax where the recorder may sleep
	// (Options.quietMax), else 0. The loop's state: quiet says the
	// recorder sleeps after the last window (it showed the target doing
	// nothing: quietTarget), sleeping that it is sleeping through the
	// window now open, woken that the target's wake-up ends this one.
	quietMax               time.Duration
	quiet, sleeping, woken bool
	fk                     *funcKernel // nil without --func
	fprev                  *funcSnap
	flost                  struct{ unmatched, inflightFull, eventsDropped uint64 }
	cgNames                *cgroupNames // by-cgroup mode
	// mmaps follows the mappings processes make as they make them; nil
	// when the host refused its events (processes are then read from
	// /proc alone) or when no stacks are taken.
	mmaps *mmapWatcher
	// runner runs a repeated command (-r); nil for one run.
	runner *runner
}

// drained is what the kernel holds at a window's end: the first stage of
// closing a window.
type drained struct {
	samples []rawSample
	bad     uint64 // sample records that could not be read
	cur     *snapshot
	endNS   int64 // where the window ends, from the recording's start
	funcs   []profile.FunctionWindow
	fcur    *funcSnap // nil without --func
	calls   bool      // a function was entered or returned
}

// drain takes the samples, the cumulative values and the function calls
// that returned by the window's end; at the recording's last window,
// every CPU's counters. The window ends where the snapshot read the CPUs'
// busy time (or at now, from the recording's start, without one): a
// recorder preempted between deciding to close a window and reading it
// (seen beside stress-ng: over 30 ms) would otherwise show a CPU busy
// for longer than the window, and the function calls are cut at the same
// moment, so that each lies in the window it returned in.
func (rc *run) drain(now time.Time, last bool) (*drained, error) {
	var d drained
	var err error
	if d.samples, d.bad, err = rc.k.drainSamples(); err != nil {
		return nil, err
	}
	if d.cur, err = rc.k.snapshot(last); err != nil {
		return nil, err
	}
	if !d.cur.busyAt.IsZero() {
		now = d.cur.busyAt
	}
	d.endNS = now.Sub(rc.start).Nanoseconds()
	if rc.fk == nil {
		return &d, nil
	}
	if d.fcur, err = rc.fk.snapshot(); err != nil {
		return nil, err
	}
	d.funcs = rc.fk.window(rc.fprev, d.fcur, d.endNS)
	for _, f := range d.funcs {
		rc.flost.unmatched += f.Unmatched
		rc.flost.inflightFull += f.InflightFull
		rc.flost.eventsDropped += f.EventsDropped
		d.calls = d.calls || len(f.Buckets) > 0 || f.Entries > 0 || f.Unmatched > 0
	}
	return &d, nil
}

// empty says whether a last window of span nanoseconds holding d would say
// nothing: a recording that ends right after a window closed does not end
// with a sliver.
func (d *drained) empty(span int64) bool {
	return span < int64(time.Millisecond) && len(d.samples) == 0 && !d.calls
}

// closeWindow drains the kernel, writes one window and reports it. The last
// window of a recording is written only when it is not empty.
func (r *Recorder) closeWindow(rc *run, last bool) error {
	now := time.Now()
	d, err := rc.drain(now, last)
	if err != nil {
		return err
	}
	endNS := d.endNS
	if last && d.empty(endNS-rc.lastNS) && !rc.runner.pending() {
		return nil
	}
	if rc.mmaps != nil {
		rc.mmaps.drain() // the mappings the window's samples were taken in
	}
	rc.readMappings(d.samples)
	win := rc.window(d, endNS, last)
	win.Quiet = rc.sleeping
	if !last {
		rc.stretch.Add(win, int64(r.opts.Interval))
	}
	// The target's wake-up ends a sleep, and a full window follows it
	// before the recorder may sleep again: the woken thread is on a CPU,
	// and what it does there is counted at its switch-out.
	rc.quiet = rc.quietMax > 0 && !last && !rc.woken && quietTarget(win) && d.cur.targetChanges == rc.prev.targetChanges
	if rc.runner != nil {
		rc.runner.window(win, rc.meta.sampleEvs[slotClock])
	}
	x, err := r.windowExtras(rc, d.cur, win)
	if err != nil {
		return err
	}
	rc.prev, rc.lastNS = d.cur, endNS
	if d.fcur != nil {
		rc.fprev = d.fcur
	}
	for _, s := range win.Samples {
		rc.samples += s.Count
	}
	rc.drops.Add(win.Drops)
	if rc.windowDone != nil {
		select {
		case rc.windowDone <- d.cur.targetChanges: // cumulative: a later one supersedes a dropped one
		default:
		}
	}
	return r.emit(rc, win, x, now.Sub(rc.start))
}

// readMappings reads the mappings of each process sampled, while it may
// still run, when they were never read or no longer cover its stacks.
func (rc *run) readMappings(samples []rawSample) {
	followed := false
	if rc.mmaps != nil && rc.sym != nil {
		// The mapping watcher was drained just before (closeWindow):
		// with none of its records lost, the symbolizer has seen every
		// exec and executable mapping before these samples, and need
		// not stat each process's executable.
		followed = rc.mmaps.lost.Load() == 0
		rc.sym.FollowExecs(followed)
	}
	for pid, a := range sampledAddrs(samples, followed) {
		if rc.sym != nil && rc.sym.NeedsSnapshot(pid, a) {
			_ = rc.sym.Snapshot(pid)
		}
		if rc.kern != nil && rc.goProcs != nil {
			rc.goProcs.add(rc.kern, pid)
		}
	}
}

// sampledAddrs returns the user addresses of each sampled process whose
// mappings must hold them. While the mapping watcher follows every
// mapping (followed), that is each sample's innermost address only, where
// the thread ran: a frame-pointer walk through code built without frame
// pointers (most C libraries) ends in words that no mapping holds, and
// every window read the maps of such a process again for them (stress-ng's
// in each window of a record -a) without learning anything.
func sampledAddrs(samples []rawSample, followed bool) map[int][]uint64 {
	addrs := map[int][]uint64{}
	for _, s := range samples {
		u := s.user
		if followed && len(u) > 1 {
			u = u[:1]
		}
		if len(u) > 0 {
			addrs[s.pid] = append(addrs[s.pid], u...)
		}
	}
	return addrs
}

// window builds the window from the previous snapshot to d, with what
// only the kernel or the command hold beside it.
func (rc *run) window(d *drained, endNS int64, last bool) *profile.Window {
	m := rc.meta
	m.startNS, m.endNS = rc.lastNS, endNS
	win := buildWindow(rc.prev, d.cur, d.samples, d.bad, m)
	if rc.kern != nil {
		win.Others = rc.kern.drainOthers(d.cur)
		if !rc.meta.noProcesses {
			win.Peers = rc.kern.drainPeers()
		}
	}
	win.Functions = d.funcs
	if rc.am != nil {
		win.AppMetrics = rc.am.poll(last)
	}
	return win
}

// emit hands win, with its extras and the recording's progress, to
// every sink in order (the file first). After Abort nothing is written.
func (r *Recorder) emit(rc *run, win *profile.Window, x *WindowExtras, elapsed time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	st := Status{Elapsed: elapsed, Windows: rc.windows + 1, Samples: rc.samples, Drops: rc.drops.Total(), Quiet: rc.quiet}
	for _, s := range r.opts.Sinks {
		if err := s.Window(win, x, st); err != nil {
			return err
		}
	}
	rc.windows++
	return nil
}

// watchCommand closes exited when the command exits. After a window in
// which a target forked or exec'd (windows: stats target_changes, as in
// watchPIDs) it registers the Go runtime of the command's process (an
// exec may have changed its binary), and after every window it re-reads
// the command's mappings unless the mapping watcher follows them
// (following). It ticked ten times a second before, which cost a
// recorder under load a sixth of its time (readlink, and the Go
// runtime's sysmon woken by it).
func watchCommand(cm *command, k *kernel, sym *symbolize.Symbolizer, gp *goProcs, following bool, windows <-chan uint64, exited, stop chan struct{}) {
	var registeredAt uint64 // addCommand registered the binary it execs
	for {
		select {
		case <-cm.done:
			close(exited)
			return
		case <-stop:
			return
		case changes := <-windows:
			if !following {
				_ = sym.Snapshot(cm.cmd.Process.Pid)
			}
			if changes != registeredAt {
				registeredAt = changes
				gp.add(k, cm.cmd.Process.Pid)
			}
		}
	}
}

// watchPIDs closes exited when every process in the target set has
// exited. It wakes when a target exits (pidWatch) and after a window
// (windows), at most once a second, to list the set again (children join
// it at fork), register the Go runtime of each target (an exec may have
// changed it) and, unless the mapping watcher follows them (following),
// re-read their mappings; a window after which no target forked or
// exec'd lists nothing when the mappings are followed. The window's
// wake-up, not a ticker of its own: an idle recorder wakes once a window,
// not twice.
func watchPIDs(k *kernel, sym *symbolize.Symbolizer, gp *goProcs, following bool, windows <-chan uint64, exited, stop chan struct{}) {
	var listed time.Time
	// The target changes (forks and execs, stats target_changes) the
	// last window had counted, and those at the last listing.
	var changes, listedAt uint64
	w := newPIDWatch()
	defer w.close()
	// check lists the set and says whether any of it runs.
	check := func() bool {
		listed, listedAt = time.Now(), changes
		pids, err := k.targetPIDs()
		if err != nil {
			return true
		}
		any := false
		for _, pid := range pids {
			if w.alive(pid) {
				any = true
				if !following {
					_ = sym.Snapshot(pid)
				}
				gp.add(k, pid)
			}
		}
		return any
	}
	// The set is listed after a window, and at once when an exit leaves
	// none watched (a child forked since the last listing may run); not
	// at every exit, which under a storm of short children would walk the
	// map for each.
	for check() {
	wait:
		for {
			select {
			case <-stop:
				return
			case pid := <-w.exits:
				w.exited(pid)
				if len(w.files) > 0 {
					continue
				}
			case changes = <-windows:
				if time.Since(listed) < 900*time.Millisecond { // windows of 1 s come a hair early
					continue
				}
				// No target forked or exec'd since the last listing: the
				// set and its binaries are as listed (exits come by pidfd).
				// The mappings are followed by the mapping watcher, or
				// re-read here each time.
				if following && changes == listedAt {
					continue
				}
			}
			break wait
		}
	}
	close(exited)
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

// procCmdline reads a process's command line; ok is false when it cannot
// be read (the process is gone), and argv is nil with ok true for an empty
// one (a kernel thread).
func procCmdline(pid int) (argv []string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, false
	}
	if len(b) == 0 {
		return nil, true
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), true
}

// cmdlines caches each process's command line while its name stays the
// same: an exec renames it, so /proc is read once per process and program
// rather than every window; a kernel thread's empty one is kept too (an
// idle host's windows are mostly kernel threads, and reading their
// command lines again each window was half of an idle recorder's time).
// A process that exits keeps the last one read.
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
	argv, ok := procCmdline(pid)
	if !ok {
		if e, ok := c.m[pid]; ok {
			return e.argv
		}
		return nil
	}
	c.m[pid] = cmdline{comm: comm, argv: argv}
	return argv
}
