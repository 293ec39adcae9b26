package collector

import (
	"fmt"
	"strings"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// plan is what a recording decides before anything is loaded into the
// kernel: the host, the target, the events measured and sampled. Every
// check that can fail without touching the kernel is made here, so that a
// bad target or an unmeasurable selection costs nothing to undo.
type plan struct {
	host     profile.Host
	cpu      host.CPUInfo
	cpus     []int
	target   Target // resolved: a cgroup by its path below the mount
	kc       kernelConfig
	statuses []profile.EventStatus // one per requested event, then any added
	// hostEvents is the probe of every other event of the CPU's
	// catalogue (profile.Header.HostEvents).
	hostEvents []profile.EventStatus
	sampleEvs  [2]string // by sample slot; "" for no miss sampling
}

// makePlan is the recording's first stage.
func (r *Recorder) makePlan() (*plan, error) {
	o := r.opts
	if err := checkPrivileges(); err != nil {
		return nil, err
	}
	// The CPU is read once per recording: it decides the default events,
	// their vendor encodings and the header's description of the host.
	cpu := host.CPUInfo{}
	if o.CPU != nil {
		cpu = *o.CPU
	} else {
		var err error
		if cpu, err = LiveCPU(); err != nil {
			return nil, fmt.Errorf("reading host: %w", err)
		}
	}
	h, err := host.Describe("/", cpu)
	if err != nil {
		return nil, fmt.Errorf("reading host: %w", err)
	}
	p := &plan{host: h, cpu: cpu}
	if p.cpus, err = pickCPUs(h.Topology, o.CPUs); err != nil {
		return nil, err
	}
	p.kc = kernelConfig{cpus: p.cpus, sampleHz: o.SampleHz, missPeriod: o.SamplePeriod, byCgroup: o.ByCgroup}
	if p.target, err = resolveTarget(o.Target, &p.kc); err != nil {
		return nil, err
	}
	evs := o.Events
	if evs == nil {
		evs = DefaultEvents(cpu)
	}
	if err := p.pickCounted(evs, ProbeEvent, o.Note); err != nil {
		return nil, err
	}
	p.planRotation(o.Warn)
	p.sampleEvs = [2]string{slotClock: "cpu-clock"}
	if ev, period, ok := pickMissEvent(cpu, o.SamplePeriod, measured); ok {
		p.kc.missEvent, p.kc.missPeriod = &ev, period
		p.sampleEvs[slotMiss] = ev.Name
	}
	p.host.Mode = HostMode(p.statuses)
	p.hostEvents = probeOthers(ModelCatalogue(cpu), p.statuses, ProbeEvent)
	return p, nil
}

// probeOthers probes the events of cat that statuses does not name, so a
// recording says of every event its host knows whether it could have been
// counted: advice then names only events the host can count.
func probeOthers(cat []Event, statuses []profile.EventStatus, probe func(Event) profile.EventStatus) []profile.EventStatus {
	asked := map[string]bool{}
	for _, st := range statuses {
		asked[st.Name] = true
	}
	var out []profile.EventStatus
	for _, ev := range cat {
		if !asked[ev.Name] {
			asked[ev.Name] = true
			out = append(out, probe(ev))
		}
	}
	return out
}

// resolveTarget checks the target and sets the kernel's target mode for
// it. A command's process is added once it is started (startCommandTarget).
func resolveTarget(tgt Target, kc *kernelConfig) (Target, error) {
	switch tgt.Kind {
	case profile.TargetPID:
		if err := checkPIDs(tgt.PIDs); err != nil {
			return tgt, err
		}
		kc.mode, kc.pids = modePIDs, tgt.PIDs
	case profile.TargetCgroup:
		g, err := resolveCgroupArg(tgt.Cgroup)
		if err != nil {
			return tgt, err
		}
		id, err := cgroupID(g)
		if err != nil {
			return tgt, err
		}
		tgt.Cgroup = cgroupPath(g)
		kc.mode, kc.cgroupID, kc.cgroupLevel = modeCgroup, id, cgroupLevel(tgt.Cgroup)
	case profile.TargetAll:
		kc.mode = modeAll
	case profile.TargetCommand:
		kc.mode = modePIDs
	default:
		return tgt, fmt.Errorf("unknown target kind %q", tgt.Kind)
	}
	return tgt, nil
}

// pickCounted probes every requested event; the measured ones get a
// counter slot. A selection of which nothing can be measured is refused
// (ErrHost); otherwise note gets one line saying what is left out.
func (p *plan) pickCounted(evs []Event, probe func(Event) profile.EventStatus, note func(string)) error {
	var unsupported []string
	for _, ev := range evs {
		st := probe(ev)
		p.statuses = append(p.statuses, st)
		if st.Status == profile.StatusMeasured {
			p.kc.counted = append(p.kc.counted, ev)
		} else {
			unsupported = append(unsupported, ev.Name)
		}
	}
	reasons := strings.Join(unsupportedReasons(p.statuses), "; ")
	if len(p.kc.counted) == 0 {
		return fmt.Errorf("%w: none of the requested events can be measured here (%s): %s", ErrHost, reasons, strings.Join(unsupported, ", "))
	}
	if len(unsupported) > 0 && note != nil {
		note(fmt.Sprintf("%s mode: %d of %d events not measured: %s; 'cacheheat caps' says which and why", HostMode(p.statuses), len(unsupported), len(p.statuses), reasons))
	}
	return nil
}

// planRotation decides how a simulated PMU multiplexes the counted events
// (muxPlan). A simulated PMU with more events than counters rotates them,
// and needs one counter that never rotates as the clock of their enabled
// time: cpu-clock is added when the selection has none.
func (p *plan) planRotation(warn func(string)) {
	if rotated, _, _, ref := muxPlan(p.kc.counted, p.cpu); len(rotated) > 0 && ref < 0 {
		clock, _ := LookupEvent("cpu-clock", p.cpu)
		p.kc.counted = append(p.kc.counted, clock)
		p.statuses = append(p.statuses, ProbeEvent(clock))
		warn("cpu-clock added: the simulated PMU's rotation needs a counter that never rotates as its time reference")
	}
	p.kc.rotated, p.kc.muxMasks, p.kc.muxCounters, p.kc.refSlot = muxPlan(p.kc.counted, p.cpu)
	if len(p.kc.rotated) > 0 {
		warn(fmt.Sprintf("%s: %d events rotate over %d counters%s; their counts are scaled by enabled/running time", SimulatedWarning, len(p.kc.rotated), p.kc.muxCounters, constrainedText(p.kc.muxMasks, p.kc.muxCounters)))
	} else if p.cpu.Simulated != "" {
		warn(SimulatedWarning)
	}
}

// measured says whether this host can count ev.
func measured(ev Event) bool { return ProbeEvent(ev).Status == profile.StatusMeasured }

// pickMissEvent chooses what the sampled slot takes, with its period: the
// first of missEvents the host measures, every period events. Without a
// hardware miss event it takes page faults, every FaultPeriod, so that a
// page-fault finding names the code that faults. ok is false when the
// host has none of them.
func pickMissEvent(cpu host.CPUInfo, period uint64, measured func(Event) bool) (ev Event, every uint64, ok bool) {
	for _, name := range missEvents {
		if ev, err := LookupEvent(name, cpu); err == nil && measured(ev) {
			return ev, period, true
		}
	}
	if ev, err := LookupEvent("page-faults", cpu); err == nil && measured(ev) {
		return ev, FaultPeriod, true
	}
	return Event{}, 0, false
}
