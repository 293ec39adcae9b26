package profile

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Format version written in every header. A reader accepts any minor version
// of the majors it knows (fields may be added) and rejects other majors.
// Version 1 (JSON records) is still read; writers write version 2.
const (
	FormatMajor = 2
	FormatMinor = 2
)

// formatMinor is the minor version written for each major version.
var formatMinor = map[int]int{1: 0, 2: FormatMinor}

// Event status values, the same words in caps, the file, JSON and the report.
const (
	StatusMeasured    = "measured"
	StatusUnsupported = "unsupported"
	StatusDenied      = "denied"
)

// Target kinds.
const (
	TargetPID     = "pid"
	TargetCgroup  = "cgroup"
	TargetAll     = "all"
	TargetCommand = "command"
)

// End reasons.
const (
	EndDuration   = "duration"
	EndTargetExit = "target-exit"
	EndSignal     = "signal"
)

// Histogram names.
const (
	HistRunqLatency = "runq-latency"
	HistOffCPU      = "offcpu"
)

// HistBuckets is the number of log2 buckets of a latency histogram. Bucket 0
// counts values in [0, 2), bucket i (i >= 1) counts values in [2^i, 2^(i+1)),
// and the last bucket also counts everything larger.
const HistBuckets = 40

// Recording is a whole recording as read back from a file.
type Recording struct {
	Header  Header
	Windows []Window
	// Stacks holds every stack referenced by a sample, keyed by StackID.
	// Stack definitions are written in the window where a stack first
	// appears, so a truncated file still defines every stack it references.
	Stacks map[uint64]Stack
	// Trailer is nil when the file ended before its trailer (recorder
	// killed); Truncated and Warning then say so.
	Trailer   *Trailer
	Truncated bool
	Warning   string
}

// Header is the first record of a file.
type Header struct {
	FormatVersion string    `json:"format_version"` // "MAJOR.MINOR"
	Tool          string    `json:"tool"`           // "cacheheat VERSION"
	StartTime     time.Time `json:"start_time"`
	Host          Host      `json:"host"`
	Target        Target    `json:"target"`
	Settings      Settings  `json:"settings"`
	// Events lists every event that was asked for, measured or not.
	Events []EventStatus `json:"events"`
	// HostEvents is what the recording host said, when the recording
	// started, of every other event of its catalogue: whether it could
	// have been counted, and why not. Advice ("add -e NAME") names only
	// events the host can count; a recording made before this field has
	// none, and HostStatus falls back on the host's mode.
	HostEvents []EventStatus `json:"host_events,omitempty"`
	// PMU is set when the hardware events were not counted by a real PMU:
	// a simulated PMU's software stand-ins (see SimulatedWarning).
	PMU *PMU `json:"pmu,omitempty"`
	// Synthetic is set on a recording that no recorder made (bench/genrec):
	// it says what made it. Its counts are invented to show an effect.
	Synthetic string `json:"synthetic,omitempty"`
	// Functions lists the --func functions whose calls are timed.
	Functions []FunctionSpec `json:"functions,omitempty"`
}

// SimulatedWarning is the sentence every output of a recording made on a
// simulated PMU carries: its hardware counts are software stand-ins.
const SimulatedWarning = "SIMULATED PMU: counts are software stand-ins, not cache events"

// PMU describes the hardware counters behind a recording when they were
// not a real PMU's.
type PMU struct {
	// Simulated names the fixture CPU (CACHEHEAT_SIMULATED_PMU) whose
	// hardware events were opened as software stand-ins.
	Simulated string `json:"simulated,omitempty"`
	// Counters is the fixture's number of general-purpose counters per
	// CPU, and Fixed the events it counts on fixed counters.
	Counters int      `json:"counters,omitempty"`
	Fixed    []string `json:"fixed,omitempty"`
	// MuxIntervalNS is how often stand-ins were rotated over the counters
	// when more were asked for than fit.
	MuxIntervalNS int64 `json:"mux_interval_ns,omitempty"`
}

// HostStatus is what the recording host said of event name: its status
// in Events when it was asked for, else in HostEvents. known is false when
// the recording does not say (an older recording, or a name outside the
// host's catalogue); then, on a host in software mode, the status of a
// hardware event that was asked for and found no PMU stands for it (a
// host without a PMU can count no hardware event), which hardware says
// whether name is one.
func (h Header) HostStatus(name string, hardware bool) (st EventStatus, known bool) {
	for _, l := range [][]EventStatus{h.Events, h.HostEvents} {
		for _, e := range l {
			if e.Name == name {
				return e, true
			}
		}
	}
	if hardware && h.Host.Mode == "software" {
		for _, e := range h.Events {
			if e.Kind != "software" && e.Status == StatusUnsupported {
				return EventStatus{Name: name, Status: e.Status, Reason: e.Reason, Errno: e.Errno}, true
			}
		}
	}
	return EventStatus{}, false
}

// Simulated says whether the recording's hardware counts are a simulated
// PMU's stand-ins.
func (h Header) Simulated() bool { return h.PMU != nil && h.PMU.Simulated != "" }

// Host describes the machine the recording was made on.
type Host struct {
	Hostname string   `json:"hostname"`
	Kernel   string   `json:"kernel"`
	CPUModel string   `json:"cpu_model"`
	Vendor   string   `json:"vendor"` // "GenuineIntel", "AuthenticAMD", ...
	Family   int      `json:"family"`
	Model    int      `json:"model"`
	Stepping int      `json:"stepping"`
	Mode     string   `json:"mode"` // "hardware" or "software"
	Topology Topology `json:"topology"`
}

// Topology is the host's CPU, NUMA and cache layout. Per-CPU arrays in
// windows are indexed by CPU id, so their length is MaxCPU()+1.
type Topology struct {
	CPUs   []CPU   `json:"cpus"`   // online CPUs, sorted by id
	Nodes  []Node  `json:"nodes"`  // NUMA nodes with at least one CPU or memory
	Caches []Cache `json:"caches"` // one entry per distinct cache instance
	// OfflineCPUs lists present but offline CPUs (never counted).
	OfflineCPUs []int `json:"offline_cpus,omitempty"`
}

// CPU is one online logical CPU.
type CPU struct {
	ID      int `json:"id"`
	Node    int `json:"node"`
	Package int `json:"package"`
	Core    int `json:"core"` // core id within the package
	// L3 is the id of the L3 cache domain (index into Topology.Caches of a
	// level-3 cache by its ID field), or -1 when the host reports none.
	L3       int   `json:"l3"`
	Siblings []int `json:"siblings"` // SMT siblings, including itself
}

// Node is one NUMA node.
type Node struct {
	ID   int   `json:"id"`
	CPUs []int `json:"cpus"`
}

// Cache is one cache instance.
type Cache struct {
	Level      int    `json:"level"`
	Type       string `json:"type"` // "Data", "Instruction", "Unified"
	ID         int    `json:"id"`   // unique within a level
	SizeBytes  int64  `json:"size_bytes"`
	LineSize   int    `json:"line_size"`
	Ways       int    `json:"ways,omitempty"`
	SharedCPUs []int  `json:"shared_cpus"`
	// Source says where the cache was read: "" (sysfs, the default) or
	// "cpuid" when sysfs listed no caches and CPUID's cache leaves were
	// decoded instead (SharedCPUs then grouped from CPUID's sharing count).
	Source string `json:"source,omitempty"`
}

// Target is what was recorded.
type Target struct {
	Kind    string   `json:"kind"` // TargetPID, TargetCgroup, TargetAll, TargetCommand
	PIDs    []int    `json:"pids"`
	Cgroup  string   `json:"cgroup,omitempty"`
	Command []string `json:"command,omitempty"`
	// AllowedCPUs are the CPUs the target's processes may run on (their
	// affinity, which a cpuset also bounds) when recording started; empty
	// when unknown (-a, -G): the recorded CPUs then.
	AllowedCPUs []int `json:"allowed_cpus,omitempty"`
}

// Settings are the recorder's parameters.
type Settings struct {
	IntervalNS   int64  `json:"interval_ns"`
	DurationNS   int64  `json:"duration_ns,omitempty"` // 0: until target exit or signal
	SampleHz     int    `json:"sample_hz"`             // cpu-clock sampling frequency
	SamplePeriod uint64 `json:"sample_period,omitempty"`
	// SampleEvents are the events stacks were sampled on.
	SampleEvents []string `json:"sample_events"`
	CPUs         []int    `json:"cpus,omitempty"` // -C filter; empty: all online
}

// EventStatus is one requested event and whether it could be measured.
type EventStatus struct {
	Name   string `json:"name"`   // perf's name, e.g. "LLC-load-misses"
	Kind   string `json:"kind"`   // "hardware", "cache", "software", "raw"
	Status string `json:"status"` // StatusMeasured, StatusUnsupported, StatusDenied
	Reason string `json:"reason,omitempty"`
	Errno  string `json:"errno,omitempty"` // e.g. "ENOENT"
	// Simulated is true when the event was counted by a software
	// stand-in on a simulated PMU; StandIn names that software event.
	Simulated bool   `json:"simulated,omitempty"`
	StandIn   string `json:"stand_in,omitempty"`
}

// Window is one closed time window of the recording.
type Window struct {
	Index   int   `json:"index"`
	StartNS int64 `json:"start_ns"` // nanoseconds since Header.StartTime
	EndNS   int64 `json:"end_ns"`
	// Counters holds per-event deltas for this window.
	Counters []Counter `json:"counters,omitempty"`
	// Processes holds per-process (and per-thread) deltas of the target.
	Processes  []Process   `json:"processes,omitempty"`
	Histograms []Histogram `json:"histograms,omitempty"`
	Samples    []Sample    `json:"samples,omitempty"`
	// NewStacks defines the stacks first referenced in this window.
	NewStacks  []Stack            `json:"new_stacks,omitempty"`
	SampleRate []SampleRate       `json:"sample_rate,omitempty"`
	Drops      Drops              `json:"drops"`
	AppMetrics map[string]float64 `json:"app_metrics,omitempty"`
	// IdleNS is each CPU's idle time in the window (index = CPU id): the
	// time it ran its idle task (/proc/stat's idle + iowait), the span
	// less its busy time in the BPF side's clock (recorders before that
	// read /proc/stat, 10 ms resolution); nil when not recorded.
	IdleNS Counts `json:"idle_ns,omitempty"`
	// Others are the processes that are not targets with cpu-clock
	// samples on the recorded CPUs in the window, most samples first: who
	// else used the CPUs.
	Others []OtherProcess `json:"others,omitempty"`
	// OffCPU is the target's blocked time by stack; nil when the recorder
	// took no off-CPU stacks (older recordings).
	OffCPU *OffCPU `json:"offcpu,omitempty"`
	// Functions holds the calls of --func functions that returned in the
	// window.
	Functions []FunctionWindow `json:"functions,omitempty"`
	// Waits is the target's time off the CPU in the window by what the
	// kernel said it waited in: every switch-out to its switch-in, exact
	// (not sampled), preemptions included; nil in recordings made before
	// wait codes.
	Waits []Wait `json:"waits,omitempty"`
	// Peers is the target's time waiting on other processes (a pipe, a
	// Unix socket, a child, a futex) by the process that woke it.
	Peers []Peer `json:"peers,omitempty"`
	// Runs are the runs of a repeated command (record -r) that ended
	// before this window closed, each once: with its samples, which the
	// window's drain completes.
	Runs []RunTotal `json:"runs,omitempty"`
	// Quiet marks a window the recorder slept through: the target had
	// done nothing in the window before (no count, sample, wait, call or
	// new process), so the recorder closed no window until the target
	// ran again or --quiet-max passed. Its length is the target's
	// quiet, not a starved recorder's (IsStretched); nil in recordings
	// made before quiet windows.
	Quiet bool `json:"quiet,omitempty"`
}

// RunTotal is one run of a command recorded with record -r: what it cost
// as a whole, the unit a CI gate compares (as perf stat -r and hyperfine
// do), where windows are the unit of a long-running service.
type RunTotal struct {
	// Index numbers the runs from 0, warm-up runs included; Warmup marks
	// the runs left out of comparisons (--warmup).
	Index  int  `json:"index"`
	Warmup bool `json:"warmup,omitempty"`
	// StartNS and EndNS are the run's start (its release) and end (its
	// exit), since the header's start time; WallNS is their difference.
	StartNS int64 `json:"start_ns"`
	EndNS   int64 `json:"end_ns"`
	WallNS  int64 `json:"wall_ns"`
	// UserNS and SysNS are the command's CPU time as wait4 reports it
	// (its waited-for descendants included). MaxRSSKB is its process's
	// peak resident set since its exec (VmHWM), read every 20 ms while it
	// ran: a lower bound, 0 for a run too short to read.
	UserNS   int64 `json:"user_ns"`
	SysNS    int64 `json:"sys_ns"`
	MaxRSSKB int64 `json:"max_rss_kb"`
	// ExitStatus is the run's exit status (128+signal when a signal
	// ended it, ExitSignal naming it).
	ExitStatus int    `json:"exit_status"`
	ExitSignal string `json:"exit_signal,omitempty"`
	// Counts are the target's totals of each measured event over the
	// run (the BPF side's per-CPU target totals at its start and end).
	Counts map[string]uint64 `json:"counts"`
	// Samples counts the run's processes' samples of the primary sample
	// event, and Functions those samples by the innermost user frame's
	// function (at most MaxRunFunctions of them, the most sampled).
	Samples   uint64            `json:"samples"`
	Functions map[string]uint64 `json:"functions,omitempty"`
}

// MaxRunFunctions bounds RunTotal.Functions.
const MaxRunFunctions = 50

// CPUNS is the run's user plus system CPU time.
func (r RunTotal) CPUNS() int64 { return r.UserNS + r.SysNS }

// Wait is the target's time in one kind of wait over a window: a reason,
// the system call and the kind of file descriptor it waited in.
type Wait struct {
	// Reason is the off-CPU reason the kernel's account gives (OffCPU*
	// reasons; stacks refine lock, poll, sleep and other).
	Reason string `json:"reason"`
	// Call is the system call ("read", "futex"), "" outside one (a page
	// fault, a preemption, a kernel thread).
	Call string `json:"call,omitempty"`
	// FD is what the call's file descriptor was: "pipe", "socket",
	// "unix-socket", "file", "block-device", "char-device", "anon", ...
	FD    string `json:"fd,omitempty"`
	NS    uint64 `json:"ns"`
	Count uint64 `json:"count"`
	// Hist is the waits' log2 nanosecond histogram (HistBuckets layout),
	// trailing zero buckets left out.
	Hist Counts `json:"hist,omitempty"`
}

// Peer is a target process's time blocked on another process in a
// window, by the process that woke it (sched_waking's current task).
type Peer struct {
	PID       int    `json:"pid"`
	WakerPID  int    `json:"waker_pid"`
	WakerComm string `json:"waker_comm"`
	Reason    string `json:"reason"`
	Call      string `json:"call,omitempty"`
	NS        uint64 `json:"ns"`
	Count     uint64 `json:"count"`
}

// OffCPU is where the target's threads were blocked in a window: every
// voluntary switch-out's blocked time (switch-out to switch-in) in
// BlockedNS, and stacks for a random sample of the switch-outs, each
// counted 1/chance times: SampledNS is their weighted time, an estimate of
// BlockedNS. A stack's share of the blocked time is its NS times the
// recording's OffCPUScale, which corrects the estimate to the exact
// total.
type OffCPU struct {
	BlockedNS uint64        `json:"blocked_ns"`
	SampledNS uint64        `json:"sampled_ns"`
	Stacks    []OffCPUStack `json:"stacks,omitempty"`
}

// OffCPUStack is the blocked time of one thread at one stack pair.
type OffCPUStack struct {
	PID         int    `json:"pid"`
	TID         int    `json:"tid"`
	UserStack   uint64 `json:"user_stack,omitempty"`   // StackID, 0: none
	KernelStack uint64 `json:"kernel_stack,omitempty"` // StackID, 0: none
	// NS is the weighted blocked time with this stack (each sampled
	// switch-out counted k times), before Scale.
	NS uint64 `json:"ns"`
	// Reason is why the thread was blocked (OffCPU* reasons), from its
	// wait code and frames at record time.
	Reason string `json:"reason"`
	// Wait is the reason its wait code alone gives (Window.Waits'
	// reason), before the frames refined it, and WaitCall and WaitFD the
	// system call and descriptor kind of that wait; all "" in older
	// recordings. Readers split each wait's exact time (a Window.Waits
	// entry: reason, call, descriptor) over its stacks' reasons.
	Wait     string `json:"wait,omitempty"`
	WaitCall string `json:"wait_call,omitempty"`
	WaitFD   string `json:"wait_fd,omitempty"`
	// LengthBucket is the log2 bucket (a Histogram's) of the sampled
	// waits' length, plus one; 0 in recordings before format 2.2. The
	// same stack and wait sampled at different lengths are different
	// entries: readers scale each stack within waits of its length
	// (OffCPUScaler).
	LengthBucket int `json:"length_bucket,omitempty"`
}

// WaitKey names one kind of wait: a Window.Waits entry's reason, call
// and descriptor kind, and a range of lengths: the stratum an off-CPU
// stack's time is scaled in.
type WaitKey struct {
	Reason, Call, FD string
	// Length is the stratum of lengths (LengthStratum), 0 for any length.
	Length int
}

// Key is the wait the stack was taken in, with its stratum of lengths.
func (s OffCPUStack) Key() WaitKey {
	return WaitKey{s.Wait, s.WaitCall, s.WaitFD, LengthStratum(s.LengthBucket)}
}

// Key is the kind of the wait, of any length.
func (w Wait) Key() WaitKey { return WaitKey{Reason: w.Reason, Call: w.Call, FD: w.FD} }

// lengthStratumBuckets is how many log2 length buckets one stratum of
// OffCPUScaler spans: a 16x range of lengths. Coarse enough that most
// strata of a recording's waits have a sampled stack.
const lengthStratumBuckets = 4

// LengthStratum is the stratum of an OffCPUStack.LengthBucket, from 1; 0
// for an unknown length.
func LengthStratum(lengthBucket int) int {
	if lengthBucket <= 0 {
		return 0
	}
	return (lengthBucket-1)/lengthStratumBuckets + 1
}

// OffCPUScale is the factor from sampled to all blocked time over the
// recording, for stacks without a wait (OffCPUScaler.Scale of a zero key).
func (r *Recording) OffCPUScale() float64 { return r.OffCPUScaler().Scale(WaitKey{}) }

// OffCPUScaler sums the recording's windows into an OffCPUScaler.
func (r *Recording) OffCPUScaler() *OffCPUScaler {
	var s OffCPUScaler
	for i := range r.Windows {
		s.Add(&r.Windows[i])
	}
	return &s
}

// OffCPUScaler turns off-CPU stack times (each sampled switch-out counted
// 1/chance times: unbiased, but of high variance when few are taken) into
// shares of the exact blocked time. With wait codes it is stratified by
// wait (reason, system call and descriptor kind): each wait's exact time
// (Window.Waits) is split over the stacks taken in that wait by their
// weighted time, so a few heavily weighted stacks of idle threads cannot
// take time from the lock waits, nor one long unsampled futex wait (a
// pthread_join) be given to the few madvise stacks of the same reason.
// From format 2.2 stacks carry their wait's length, and each wait is also
// stratified by length (a 16x range, LengthStratum): the chance of a
// stack is set before its wait's length is known, so a single long wait
// (a Go program's signal-handling thread, blocked for the whole
// recording) taken at a small chance weighed as much as thousands of
// short lock waits and took their time (rcu bad's lock share swung from
// 17% to 0.4% between runs on that one wait); within its length it can
// only take the time of waits as long. A stratum's exact time is the
// wait's exact time split by its log2 histogram (each bucket's count
// times its middle, 1.5 x 2^b). Without wait codes, one stratum: all
// blocked time over all sampled time. Either is taken over the whole
// recording, not window by window: a window with few sampled switch-outs
// has a ratio far from 1 by chance (one was seen at thousands, which made
// an idle 4 s recording block for hours and invented a lock wait).
type OffCPUScaler struct {
	blocked, sampled uint64
	// exact is each wait's exact blocked time, by length stratum too
	// (keys with Length > 0), weighted the weighted time of the stacks
	// taken in it; nil without wait codes.
	exact    map[WaitKey]float64
	weighted map[WaitKey]float64
	// lengths: the stacks carry their wait's length.
	lengths bool
}

// Add takes a window's off-CPU times.
func (s *OffCPUScaler) Add(w *Window) {
	if w.OffCPU != nil {
		s.blocked += w.OffCPU.BlockedNS
		s.sampled += w.OffCPU.SampledNS
		for _, st := range w.OffCPU.Stacks {
			if st.Wait != "" {
				if s.weighted == nil {
					s.weighted = map[WaitKey]float64{}
				}
				k := st.Key()
				s.weighted[k] += float64(st.NS)
				s.lengths = s.lengths || k.Length > 0
			}
		}
	}
	for _, wt := range w.Waits {
		if wt.Reason == OffCPURunq {
			continue // preemptions: no stacks are taken for them
		}
		if s.exact == nil {
			s.exact = map[WaitKey]float64{}
		}
		k := wt.Key()
		s.exact[k] += float64(wt.NS)
		// The wait's time by length stratum, from its histogram.
		var sum float64
		est := map[int]float64{}
		for b, n := range wt.Hist {
			mid := 1.0
			if b > 0 {
				mid = 1.5 * math.Ldexp(1, b)
			}
			est[LengthStratum(b+1)] += float64(n) * mid
			sum += float64(n) * mid
		}
		for st, e := range est {
			if e > 0 {
				k.Length = st
				s.exact[k] += float64(wt.NS) * e / sum
			}
		}
	}
}

// Scale is the factor from a stack's weighted time to its share of the
// exact blocked time, for a stack taken in wait k (a zero key for a stack
// without one); 1 when nothing was sampled.
func (s *OffCPUScaler) Scale(k WaitKey) float64 {
	if k.Reason != "" && s.exact != nil {
		if w := s.weighted[k]; w > 0 {
			return s.exact[k] / w
		}
		return 1
	}
	if s.sampled == 0 {
		return 1
	}
	return float64(s.blocked) / float64(s.sampled)
}

// Unsampled is the exact blocked time of the waits no stack was taken
// in, by their reason: time the stacks cannot split, shown under the
// kernel's reason.
func (s *OffCPUScaler) Unsampled() map[string]float64 {
	out := map[string]float64{}
	for k, ns := range s.exact {
		// With lengths, the strata; without, the waits whole.
		if (k.Length > 0) == s.lengths && s.weighted[k] == 0 && ns > 0 {
			out[k.Reason] += ns
		}
	}
	return out
}

// OtherProcess is a process that is not a target, by its cpu-clock
// samples.
type OtherProcess struct {
	PID     int    `json:"pid"`
	Comm    string `json:"comm"`
	Samples uint64 `json:"samples"`
}

// Counter is one event's delta in a window.
type Counter struct {
	Event string `json:"event"`
	// PerCPU is what the target's tasks counted on each CPU (index = CPU
	// id). With target "all" it equals HostPerCPU.
	PerCPU Counts `json:"per_cpu"`
	// HostPerCPU is what every task counted on each CPU: context for the
	// target's share.
	HostPerCPU Counts `json:"host_per_cpu,omitempty"`
	// Enabled and Running are the summed times (ns) the counters were
	// enabled and actually counting. Running < Enabled means the PMU
	// multiplexed the event and the counts were scaled by Enabled/Running.
	Enabled uint64 `json:"enabled_ns"`
	Running uint64 `json:"running_ns"`
}

// Process is one target process's deltas in a window.
type Process struct {
	PID     int               `json:"pid"`
	Comm    string            `json:"comm"`
	Cmdline []string          `json:"cmdline,omitempty"`
	Counts  map[string]uint64 `json:"counts"`
	Threads []Thread          `json:"threads,omitempty"`

	// Container is the id of the container (or the uid of the pod) the
	// process ran in, from its cgroup, when it ran in one.
	Container string `json:"container,omitempty"`
}

// Thread is one thread's deltas in a window.
type Thread struct {
	TID    int               `json:"tid"`
	Comm   string            `json:"comm"`
	Counts map[string]uint64 `json:"counts"`
}

// Histogram is one latency histogram's counts in a window.
type Histogram struct {
	Name string `json:"name"` // HistRunqLatency, HistOffCPU
	Unit string `json:"unit"` // "ns"
	// PerCPU[cpu][bucket] counts; trailing zero buckets may be omitted.
	PerCPU []Counts `json:"per_cpu"`
}

// Sample is a count of identical stack samples in a window.
type Sample struct {
	Event       string `json:"event"`
	PID         int    `json:"pid"`
	TID         int    `json:"tid"`
	CPU         int    `json:"cpu"`
	UserStack   uint64 `json:"user_stack,omitempty"`   // StackID, 0: none
	KernelStack uint64 `json:"kernel_stack,omitempty"` // StackID, 0: none
	Count       uint64 `json:"count"`
}

// Stack is a symbolized call stack, innermost frame first.
type Stack struct {
	ID     uint64  `json:"id"` // non-zero
	Kernel bool    `json:"kernel,omitempty"`
	Frames []Frame `json:"frames"`
}

// Frame is one symbolized frame. Function is empty when the address could
// not be resolved; String() then shows module+0xoffset.
type Frame struct {
	Function string `json:"function,omitempty"`
	Module   string `json:"module,omitempty"`
	Offset   uint64 `json:"offset,omitempty"` // address relative to the module
	// BuildID identifies the module file's contents (GNU build id in hex,
	// or a Go build id); empty when unknown. pprof exports carry it.
	BuildID string `json:"build_id,omitempty"`
}

// SampleRate compares requested and achieved sampling in a window.
type SampleRate struct {
	Event     string  `json:"event"`
	Requested float64 `json:"requested_hz"` // per CPU
	Achieved  float64 `json:"achieved_hz"`  // per CPU, averaged over sampled CPUs
	Samples   uint64  `json:"samples"`
}

// Drops counts data lost in a window; every field is shown in the report.
type Drops struct {
	// StackErrors: stack ids the kernel could not store (stack map full or
	// hash collision, bpf_get_stackid < 0).
	StackErrors uint64 `json:"stack_errors"`
	// SampleMapFull: samples lost because the sample ring (the BPF ring
	// buffer the samples reach user space through) was full. Recordings
	// made before the ring count a full sample hash map here.
	SampleMapFull uint64 `json:"sample_map_full"`
	// ProcMapFull: counter deltas lost because the per-task map was full.
	ProcMapFull uint64 `json:"proc_map_full"`
	// Throttled: perf throttle events (the kernel lowered the sample rate).
	Throttled uint64 `json:"throttled"`
	// Other map-update failures in the BPF programs.
	MapErrors uint64 `json:"map_errors"`
}

// Add accumulates o into d.
func (d *Drops) Add(o Drops) {
	d.StackErrors += o.StackErrors
	d.SampleMapFull += o.SampleMapFull
	d.ProcMapFull += o.ProcMapFull
	d.Throttled += o.Throttled
	d.MapErrors += o.MapErrors
}

// Total is the sum of all drop counts.
func (d Drops) Total() uint64 {
	return d.StackErrors + d.SampleMapFull + d.ProcMapFull + d.Throttled + d.MapErrors
}

// String says what was lost in words, or "none".
func (d Drops) String() string {
	var parts []string
	for _, x := range []struct {
		n    uint64
		what string
	}{
		{d.StackErrors, "stack errors"},
		{d.SampleMapFull, "samples lost (sample ring full)"},
		{d.ProcMapFull, "counter deltas lost (task map full)"},
		{d.Throttled, "throttle events"},
		{d.MapErrors, "other map errors"},
	} {
		if x.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// DropWindowsString says which of a recording's windows windows lost
// data (ws: the windows that did, in order), the first few with their
// counts; "" when none did.
func DropWindowsString(ws []WindowDrops, windows int) string {
	if len(ws) == 0 {
		return ""
	}
	const shown = 5
	var parts []string
	for i, w := range ws {
		if i == shown {
			parts = append(parts, fmt.Sprintf("%d more", len(ws)-shown))
			break
		}
		parts = append(parts, fmt.Sprintf("window %d: %d", w.Window, w.Drops.Total()))
	}
	n := fmt.Sprintf("%d windows", len(ws))
	if len(ws) == 1 {
		n = "1 window"
	}
	return fmt.Sprintf("data lost in %s of %d (%s)", n, windows, strings.Join(parts, ", "))
}

// Trailer is the last record of a finished recording.
type Trailer struct {
	EndReason  string    `json:"end_reason"` // EndDuration, EndTargetExit, EndSignal
	EndTime    time.Time `json:"end_time"`
	ExitStatus *int      `json:"exit_status,omitempty"` // command target's exit status
	// ExitSignal names the signal that ended the command target
	// ("SIGKILL"), when one did; ExitStatus is then 128+its number.
	ExitSignal string             `json:"exit_signal,omitempty"`
	Windows    int                `json:"windows"`
	Drops      Drops              `json:"drops"`
	AppMetrics map[string]float64 `json:"app_metrics,omitempty"` // final values
	// AppMetricsPartial is set when the command had not finished when
	// AppMetrics was last read (the recording ended first and the command
	// did not exit within the grace): the values so far, not the run's
	// own final values.
	AppMetricsPartial bool     `json:"app_metrics_partial,omitempty"`
	Warnings          []string `json:"warnings,omitempty"`
	// Runs is how many runs of a repeated command (record -r) were
	// recorded, warm-up included; RunsFailed says why they stopped early
	// when a run failed (its exit status is ExitStatus).
	Runs       int    `json:"runs,omitempty"`
	RunsFailed string `json:"runs_failed,omitempty"`
	// Lines are the source lines of the sampled addresses, resolved from
	// the binaries' debug information when the recording ended, so a
	// report reads no debug information (and shows lines of binaries
	// since rebuilt or deleted, and on another host). Addresses not here
	// are resolved from the files on the reading host.
	Lines []SourceLines `json:"lines,omitempty"`
}

// SourceLines are the source lines of one file's sampled addresses.
type SourceLines struct {
	Module  string `json:"module"`
	BuildID string `json:"build_id"`
	// Names are the function and file names the lines refer to by index.
	Names []string    `json:"names"`
	Addrs []AddrLines `json:"addrs"`
}

// AddrLines is one address's inline chain, innermost first. Offset is
// the file offset looked up: a caller frame's return address minus one
// (the call), an innermost frame's own offset.
type AddrLines struct {
	Offset uint64       `json:"offset"`
	Lines  []SourceLine `json:"lines"`
}

// SourceLine is one level of an inline chain; Function and File index
// the file's Names (-1: unknown); Inlined says this level was inlined
// into the next.
type SourceLine struct {
	Function int  `json:"function"`
	File     int  `json:"file"`
	Line     int  `json:"line"`
	Inlined  bool `json:"inlined,omitempty"`
}

// String describes the target in one line, the same in every output:
// "command: ARGS", "cgroup: PATH", "pid: 1,2", "all: every task on the
// host", else the kind.
func (t Target) String() string {
	switch {
	case len(t.Command) > 0:
		return t.Kind + ": " + strings.Join(t.Command, " ")
	case t.Cgroup != "":
		return t.Kind + ": " + t.Cgroup
	case len(t.PIDs) > 0:
		parts := make([]string, len(t.PIDs))
		for i, p := range t.PIDs {
			parts[i] = strconv.Itoa(p)
		}
		return t.Kind + ": " + strings.Join(parts, ",")
	case t.Kind == TargetAll:
		return t.Kind + ": every task on the host"
	}
	return t.Kind
}
