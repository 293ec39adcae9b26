// Package probe measures the machine a profile is read against: what a
// cache line bounce between two cores costs (the core-to-core matrix),
// the load latency of each working-set size (the L1/L2/L3/DRAM
// staircase) and the read and copy bandwidth of each level, for one
// thread and for all. It needs no privileges and no BPF: pinned threads
// and a clock. docs/PROBE.md says how each number is measured.
package probe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/workloads"
)

// Result is one probe of a host: what `cacheheat probe --json` writes.
type Result struct {
	Host      string           `json:"host"`
	Kernel    string           `json:"kernel,omitempty"`
	CPUModel  string           `json:"cpu_model,omitempty"`
	Time      time.Time        `json:"time"`
	Quick     bool             `json:"quick"`
	DurationS float64          `json:"duration_s"`
	Topology  profile.Topology `json:"topology"`
	// Order is the measured CPUs in topology order: SMT siblings
	// together, then L3 domains, nodes and packages. The matrix, the
	// page and a report's per-core heatmaps use it.
	Order []int `json:"order"`
	// Groups are the sets of CPUs that share something, for the page
	// to outline: "smt" (one core), "l3", "node", "package".
	Groups    []Group     `json:"groups"`
	C2C       *Matrix     `json:"c2c,omitempty"`
	Staircase []Staircase `json:"staircase,omitempty"`
	Bandwidth []Bandwidth `json:"bandwidth,omitempty"`
	Noise     Noise       `json:"noise"`
	// Notes say what was not measured, and why.
	Notes []string `json:"notes,omitempty"`
	// Interrupted: Ctrl-C stopped the probe; what was measured is kept.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Group is a set of CPUs that share a core, a cache, a node or a package.
type Group struct {
	Kind string `json:"kind"` // "smt", "l3", "node", "package"
	ID   int    `json:"id"`
	CPUs []int  `json:"cpus"`
}

// Noise says how busy the measured CPUs were with work other than the
// probe's: another load makes every number slower and noisier.
type Noise struct {
	// OtherBusy is the other tasks' share of the measured CPUs' time
	// while the probe ran (from /proc/stat, less the probe's own CPU
	// time), 0 to 1; -1 when /proc/stat could not be read.
	OtherBusy float64 `json:"other_busy"`
	Warning   string  `json:"warning,omitempty"`
}

// noisyShare is the other tasks' share of the CPUs above which the
// probe warns that its numbers were measured under load.
const noisyShare = 0.05

// Options say what to measure.
type Options struct {
	// CPUs to measure; nil: every CPU this process may run on.
	CPUs []int
	// Quick measures fewer rounds and sizes (about 10 s on 16 CPUs).
	Quick bool
	// Root is where host facts are read ("/").
	Root string
	// Progress, when set, gets one line per step.
	Progress func(string)
	// MaxFullCPUs is the most CPUs whose every ordered pair is
	// measured; above it pairs are sampled (SamplePairs). 0: 32.
	MaxFullCPUs int
	// Parts limits what is measured: any of "c2c", "staircase",
	// "bandwidth"; nil: all three.
	Parts []string
}

// ErrCPUs is returned (wrapped) for a --cpus list that names CPUs this
// process cannot run on.
var ErrCPUs = errors.New("CPUs not available")

// Run probes the host. ctx's end (Ctrl-C) stops it between
// measurements; the Result then holds what was measured and says it was
// interrupted.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.MaxFullCPUs == 0 {
		o.MaxFullCPUs = 32
	}
	h, err := host.Detect(o.Root)
	if err != nil {
		return nil, err
	}
	allowed := workloads.AllowedCPUs()
	cpus, err := checkCPUs(o.CPUs, allowed, h.Topology)
	if err != nil {
		return nil, err
	}
	r := &Result{
		Host: h.Hostname, Kernel: h.Kernel, CPUModel: h.CPUModel, Time: time.Now().UTC(),
		Quick: o.Quick, Topology: h.Topology,
	}
	r.Order = host.TopologyOrder(h.Topology, cpus)
	r.Groups = Groups(h.Topology, r.Order)
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	want := func(p string) bool { return len(o.Parts) == 0 || slices.Contains(o.Parts, p) }
	load := startLoad(r.Order)
	start := time.Now()
	if want("c2c") {
		if len(r.Order) < 2 {
			r.Notes = append(r.Notes, fmt.Sprintf("core-to-core matrix not measured: it needs two CPUs, and this process may run on %s only", host.FormatCPUList(r.Order)))
		} else {
			progress("core-to-core latency, %d CPUs", len(r.Order))
			r.C2C = measureMatrix(ctx, r.Order, h.Topology, o, progress)
			r.Notes = append(r.Notes, r.C2C.notes()...)
		}
	}
	if want("staircase") && ctx.Err() == nil {
		progress("latency staircase")
		r.Staircase = measureStaircases(ctx, r.Order, h.Topology, o.Quick)
		r.Notes = append(r.Notes, staircaseNotes(r.Staircase)...)
	}
	if want("bandwidth") && ctx.Err() == nil {
		progress("bandwidth")
		r.Bandwidth = measureBandwidth(ctx, r.Order, h.Topology, o.Quick)
	}
	r.DurationS = time.Since(start).Seconds()
	r.Noise = load.stop()
	r.Interrupted = ctx.Err() != nil
	return r, nil
}

// checkCPUs checks a requested CPU list against the CPUs this process
// may run on and the host's online CPUs; nil asks for every allowed one.
func checkCPUs(want, allowed []int, topo profile.Topology) ([]int, error) {
	online := map[int]bool{}
	for _, c := range topo.CPUs {
		online[c.ID] = true
	}
	if want == nil {
		var out []int
		for _, c := range allowed {
			if online[c] {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: none of the CPUs this process may run on (%s) is online", ErrCPUs, host.FormatCPUList(allowed))
		}
		return out, nil
	}
	var offline, notAllowed []int
	for _, c := range want {
		switch {
		case !online[c]:
			offline = append(offline, c)
		case !slices.Contains(allowed, c):
			notAllowed = append(notAllowed, c)
		}
	}
	switch {
	case len(offline) > 0:
		return nil, fmt.Errorf("%w: CPU %s is offline or absent (online: %s)", ErrCPUs, host.FormatCPUList(offline), host.FormatCPUList(onlineList(topo)))
	case len(notAllowed) > 0:
		return nil, fmt.Errorf("%w: this process may not run on CPU %s (its affinity, set by taskset or a cpuset, allows %s)", ErrCPUs, host.FormatCPUList(notAllowed), host.FormatCPUList(allowed))
	}
	out := slices.Clone(want)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func onlineList(topo profile.Topology) []int {
	out := make([]int, len(topo.CPUs))
	for i, c := range topo.CPUs {
		out[i] = c.ID
	}
	return out
}
