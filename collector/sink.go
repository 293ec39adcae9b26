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

// Sink receives a recording as the recorder makes it: the header once,
// before the first window, then every window right after it is made,
// then the end. Everything the recorder feeds is a sink, the same way:
// the file (FileSink), the live view, the status line, the Prometheus
// exporter; a new output (a pusher to a profiling service) is one more
// type with these three methods. Sinks are called in Options.Sinks
// order, on the recorder's goroutine, and must return quickly; a window
// must not be modified (a sink may keep it). An error from a sink ends
// the recording with that error (the file's: disk full).
type Sink interface {
	Header(h profile.Header) error
	// Window gets the window, what only a live consumer needs beside it
	// (the file does not hold it), and the recording's progress.
	Window(w *profile.Window, x *WindowExtras, s Status) error
	// Close gets the trailer when the recording ends, or nil when it was
	// aborted (Recorder.Abort: a second Ctrl-C), which ends the file
	// without one.
	Close(t *profile.Trailer) error
}

// FileSink writes the recording file at path (profile.Create: a
// temporary file renamed into place when closed with a trailer).
func FileSink(path string) Sink { return &fileSink{path: path} }

type fileSink struct {
	path string
	w    *profile.Writer
}

func (f *fileSink) Header(h profile.Header) error {
	w, err := profile.Create(f.path, h)
	f.w = w
	return err
}

func (f *fileSink) Window(w *profile.Window, _ *WindowExtras, _ Status) error {
	if f.w == nil {
		return nil
	}
	return f.w.WriteWindow(w)
}

func (f *fileSink) Close(t *profile.Trailer) error {
	w := f.w
	f.w = nil
	switch {
	case w == nil:
		return nil
	case t == nil:
		return w.Abort()
	}
	return w.Close(*t)
}

// WindowExtras is what a sink gets beside each window.
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

// windowExtras builds what sinks get beside win (cheap: the cgroups are
// walked only when counting by cgroup, the programs' run time only with
// BPFStats). It runs before cur becomes the previous snapshot.
func (r *Recorder) windowExtras(rc *run, cur *snapshot, win *profile.Window) (*WindowExtras, error) {
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

// WindowFunc is a Sink that calls itself with each window (as
// http.HandlerFunc is a handler): for a caller that only wants to know a
// window was made.
type WindowFunc func(w *profile.Window, s Status)

func (WindowFunc) Header(profile.Header) error { return nil }

func (f WindowFunc) Window(w *profile.Window, _ *WindowExtras, s Status) error {
	f(w, s)
	return nil
}

func (WindowFunc) Close(*profile.Trailer) error { return nil }
