package collector

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/profile"
)

// WindowSink receives a recording in memory as it is made, beside the
// file: the header once, before the first window, then every window right
// after it was written. The live view is one; nothing is read back from
// disk. Both calls run on the recorder's goroutine and must return
// quickly; the window must not be modified (the sink may keep it).
//
// A recorder with sinks may have no file (Options.Output ""): the exporter
// is such a sink.
type WindowSink interface {
	Header(h profile.Header)
	Window(w *profile.Window, s Status)
}

// ExtrasSink is a WindowSink that also wants, just before each window,
// what only a live consumer needs and the file does not hold.
type ExtrasSink interface {
	WindowSink
	Extras(x *WindowExtras)
}

// WindowExtras is what an ExtrasSink gets beside a window.
type WindowExtras struct {
	// Cgroups holds every cgroup with a change in the window when the
	// recorder counts by cgroup (Options.ByCgroup), and every cgroup that
	// was removed since the last window, marked Removed.
	Cgroups []CgroupWindow
	// CgroupMapFull counts per-cgroup updates the kernel dropped because
	// its cgroup map was full, in the window.
	CgroupMapFull uint64
	// Programs are the BPF programs' cumulative run time and run count,
	// when Options.BPFStats is set and the kernel keeps them.
	Programs []ProgramStats
	// MapEntries is the number of entries in the BPF maps that grow with
	// the host (tasks, cgroups, samples) at the window's end.
	MapEntries map[string]int
}

// CgroupWindow is one cgroup v2's deltas over a window.
type CgroupWindow struct {
	ID uint64
	// Path is the cgroup's path below the cgroup v2 mount, "/" for the
	// root, as /proc/PID/cgroup writes it; "" when the cgroup was removed
	// before it could be named.
	Path string
	// Removed: the cgroup no longer exists; these are its last counts.
	Removed bool
	Counts  map[string]uint64 // by event name; zero deltas left out
	// Runq and OffCPU are log2 nanosecond histograms (profile.HistBuckets
	// buckets, the layout of profile.Histogram); RunqNS and OffCPUNS the
	// sums of the values they count.
	Runq     []uint64
	RunqNS   uint64
	OffCPU   [OffCPUReasons][]uint64
	OffCPUNS [OffCPUReasons]uint64
}

// Off-CPU reasons: why a thread left the CPU, from its scheduler state at
// the switch (enum offcpu_reason in bpf/cacheheat.h).
const (
	OffCPUPreempted = int(bpf.CacheheatOffcpuReasonOFFCPU_PREEMPTED) // still runnable: preempted or yielded
	OffCPUSleep     = int(bpf.CacheheatOffcpuReasonOFFCPU_SLEEP)     // interruptible sleep: futex, poll, nanosleep, pipe
	OffCPUBlocked   = int(bpf.CacheheatOffcpuReasonOFFCPU_BLOCKED)   // uninterruptible: mostly disk I/O and some kernel locks
	OffCPUIdle      = int(bpf.CacheheatOffcpuReasonOFFCPU_IDLE)      // an idle kernel worker (TASK_IDLE)
	OffCPUOther     = int(bpf.CacheheatOffcpuReasonOFFCPU_OTHER)     // stopped, traced or exiting
	OffCPUReasons   = int(bpf.CacheheatOffcpuReasonOFFCPU_REASONS)
)

// OffCPUReasonNames names the off-CPU reasons by index.
var OffCPUReasonNames = [OffCPUReasons]string{"preempted", "sleep", "blocked", "idle", "other"}

// ProgramStats is one BPF program's cumulative cost as the kernel accounts
// it (kernel.bpf_stats_enabled, or ebpf.EnableStats while the recorder runs).
type ProgramStats struct {
	Name     string
	RunTime  time.Duration
	RunCount uint64
}

// windowExtras builds what ExtrasSinks get beside win; nil when no sink
// wants it. It runs before cur becomes the previous snapshot.
func (r *Recorder) windowExtras(rc *run, cur *snapshot, win *profile.Window) (*WindowExtras, error) {
	want := false
	for _, s := range r.opts.Sinks {
		if _, ok := s.(ExtrasSink); ok {
			want = true
		}
	}
	if !want {
		return nil, nil
	}
	x := &WindowExtras{MapEntries: map[string]int{"samples": len(win.Samples)}}
	k, isKernel := rc.k.(*kernel)
	if rc.cgNames != nil && isKernel {
		var err error
		x.Cgroups, err = cgroupWindows(rc.prev, cur, rc.cgNames, rc.meta.events, k.forgetCgroup)
		if err != nil {
			return nil, err
		}
		x.CgroupMapFull = delta(cur.cgroupFull, rc.prev.cgroupFull)
		x.MapEntries["cgroups"] = len(cur.cgroups)
	}
	x.MapEntries["tasks"] = len(cur.tasks)
	// Without run-time stats the kernel reports 0 for every program: no
	// number is better than a false one.
	if r.opts.BPFStats && isKernel && (r.statsOn || bpfStatsSysctl()) {
		x.Programs = k.programStats()
	}
	return x, nil
}

// enableBPFStats turns on the kernel's per-program run-time accounting
// until the returned function is called. It costs two clock reads per
// program run, which is why the kernel keeps it off by default.
func enableBPFStats() (func(), error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("bpf program run times not available unless kernel.bpf_stats_enabled=1 (turning them on needs CAP_SYS_ADMIN: %w)", err)
	}
	return func() { c.Close() }, nil
}

// bpfStatsSysctl says whether the kernel keeps BPF run times anyway
// (sysctl kernel.bpf_stats_enabled=1, set by an administrator).
func bpfStatsSysctl() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}
