package attribution

import (
	"fmt"
	"math"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// NeedFunctions is the need of rules that read --func functions.
const NeedFunctions = "functions"

var functions = Need{Kind: NeedFunctions}

// Time counters of a call: where its latency went.
var timeCounters = []string{profile.FuncOnCPU, profile.FuncRunq, profile.FuncBlocked}

// causes names what a counter says a slow call was doing, for the
// verdict, in the order ties are broken.
var causes = []struct {
	counter, cause, advice string
}{
	{profile.FuncMajFlt, "major page faults (reads from storage)", "The slow calls wait for pages read from disk: keep the working set in memory (mlock, larger page cache, prefetch with madvise(MADV_WILLNEED))."},
	{profile.FuncMinFlt, "page faults", "The slow calls touch fresh memory: reuse buffers instead of mapping new ones, pre-fault (MAP_POPULATE), raise malloc's M_MMAP_THRESHOLD or use huge pages."},
	{profile.FuncVolCS, "blocking (locks, I/O, sleeps)", "The slow calls block: look at what they wait for (off-CPU stacks), shorten critical sections or make the I/O asynchronous."},
	{profile.FuncInvolCS, "preemption", "The slow calls are preempted: the CPUs are oversubscribed; give the thread its own CPU or fewer competitors."},
	{profile.FuncMigrations, "CPU migrations", "The slow calls hop between CPUs and restart on cold caches: pin the thread."},
}

// timeCause names the time counters for the verdict when no event
// counter rises with the tail.
var timeCause = map[string]struct{ cause, advice string }{
	profile.FuncOnCPU:   {"more work on the CPU", "The slow calls run longer on the CPU with no more faults or switches: a slower code path for some inputs, or cache misses (record on a host with a PMU to count them)."},
	profile.FuncRunq:    {"waiting for a CPU", "The slow calls wait on a run queue: the host or the cgroup is saturated; add CPU or lower the load."},
	profile.FuncBlocked: {"blocking", "The slow calls are off the CPU, not runnable: they wait for a lock, I/O or a timer."},
}

// TailRow is one counter of a tail-versus-median comparison.
type TailRow struct {
	Counter string
	Tail    float64 // mean per call in the tail buckets
	Median  float64 // mean per call in the median buckets
	Ratio   float64 // Tail / max(Median, floor); +Inf never (floored)
	// Share is, for the time counters, the fraction of the extra latency
	// of a tail call (over a median call) spent this way.
	Share float64
}

// TailCompare compares a function's slowest calls with its median ones.
type TailCompare struct {
	Function   string
	Calls      uint64
	P50, P99   float64
	TailFrom   int // first tail bucket: the one holding p99
	MedianFrom int // median buckets: the one holding p50, and its neighbours
	MedianTo   int
	// TailCalls and MedianCalls count the calls in each group; the
	// counted ones have per-call counters (Go calls that changed threads
	// do not).
	TailCalls, MedianCalls     uint64
	TailCounted, MedianCounted uint64
	TailLatency, MedianLatency float64 // mean latency per call, ns
	Rows                       []TailRow
	// TimeCounter is the time counter holding most of the extra latency,
	// and Cause the event counter that rose most (empty when none passed
	// the thresholds).
	TimeCounter string
	Cause       string
}

// perCallFloor stands in for a counter that is absent from the median
// calls: one event in a hundred calls.
const perCallFloor = 0.01

// CompareTail splits a function's calls into the tail (the bucket holding
// p99 and above) and the median (the bucket holding p50 and the buckets
// next to it), and compares per-call means of every counter. ok is false
// when the function has no calls or the two groups overlap.
func CompareTail(a *profile.FunctionAgg) (TailCompare, bool) {
	tc := TailCompare{Function: a.Spec.Name, Calls: a.Calls, P50: profile.Percentile(a.Hist, 0.5), P99: profile.Percentile(a.Hist, 0.99)}
	if a.Calls == 0 {
		return tc, false
	}
	tc.TailFrom = bucketOf(a.Hist, 0.99)
	mid := bucketOf(a.Hist, 0.5)
	tc.MedianFrom, tc.MedianTo = max(mid-1, 0), mid+1
	if tc.MedianTo >= tc.TailFrom {
		tc.MedianTo = tc.TailFrom - 1
	}
	if tc.MedianTo < tc.MedianFrom || mid >= tc.TailFrom {
		return tc, false
	}
	tail := sumBuckets(a, tc.TailFrom, profile.HistBuckets-1)
	med := sumBuckets(a, tc.MedianFrom, tc.MedianTo)
	tc.TailCalls, tc.MedianCalls = tail.Calls, med.Calls
	tc.TailCounted, tc.MedianCounted = tail.Counted, med.Counted
	tc.TailLatency = ratio(float64(tail.LatencyNS), float64(tail.Calls))
	tc.MedianLatency = ratio(float64(med.LatencyNS), float64(med.Calls))
	extra := tc.TailLatency - tc.MedianLatency
	bestShare, bestRatio := -1.0, 0.0
	for i, name := range a.Spec.Counters {
		row := TailRow{Counter: name}
		if i < len(tail.Sums) {
			row.Tail = ratio(float64(tail.Sums[i]), float64(tail.Counted))
			row.Median = ratio(float64(med.Sums[i]), float64(med.Counted))
		}
		row.Tail, row.Median = zeroNaN(row.Tail), zeroNaN(row.Median)
		row.Ratio = row.Tail / max(row.Median, perCallFloor)
		if isTime(name) && extra > 0 {
			row.Share = (row.Tail - row.Median) / extra
			if row.Share > bestShare {
				bestShare, tc.TimeCounter = row.Share, name
			}
		}
		tc.Rows = append(tc.Rows, row)
	}
	for _, c := range causes {
		row, ok := tc.row(c.counter)
		if ok && row.Ratio >= tailCauseRatio && row.Tail-row.Median >= tailCauseExcess && row.Ratio > bestRatio {
			bestRatio, tc.Cause = row.Ratio, c.counter
		}
	}
	return tc, true
}

// Thresholds of the verdict's cause (function-tail's table repeats them).
const (
	tailCauseRatio  = 4 // per call, tail over median
	tailCauseExcess = 1 // at least one more event per tail call
)

func (tc TailCompare) row(counter string) (TailRow, bool) {
	for _, r := range tc.Rows {
		if r.Counter == counter {
			return r, true
		}
	}
	return TailRow{}, false
}

// Verdict says in one sentence where the tail's extra time went and
// what the slow calls did more of.
func (tc TailCompare) Verdict() string {
	var b strings.Builder
	// The tail is a whole log2 latency bucket, so it holds more than 1%
	// of the calls when the p99 falls low in a crowded bucket: the
	// sentence says how many it is, not "the slowest 1%".
	fmt.Fprintf(&b, "%s: the slowest %s of %s calls (%s, every call of %s or more: the latency bucket that holds the p99, and above) take %s on average, against %s for the %s calls around the median",
		tc.Function, profile.GroupDigits(tc.TailCalls, ","), profile.GroupDigits(tc.Calls, ","), pctOf(tc.TailCalls, tc.Calls),
		metric.FormatNS(profile.BucketLower(tc.TailFrom)), metric.FormatNS(tc.TailLatency), metric.FormatNS(tc.MedianLatency), profile.GroupDigits(tc.MedianCalls, ","))
	if r, ok := tc.row(tc.TimeCounter); ok {
		fmt.Fprintf(&b, "; %.0f%% of their extra time is %s", 100*r.Share, timeWords[tc.TimeCounter])
	}
	if r, ok := tc.row(tc.Cause); ok {
		fmt.Fprintf(&b, "; %s the %s per call (%.3g against %.3g): the tail's cause is %s", timesWords(r.Ratio), tc.Cause, r.Tail, r.Median, causeName(tc.Cause))
	} else if c, ok := timeCause[tc.TimeCounter]; ok {
		fmt.Fprintf(&b, "; no fault, switch or migration count rises with it: %s", c.cause)
	}
	return b.String()
}

// pctOf is n of total in percent, with the precision a small share needs.
func pctOf(n, total uint64) string {
	p := 100 * ratio(float64(n), float64(total))
	if p < 10 {
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", p)
}

var timeWords = map[string]string{
	profile.FuncOnCPU:   "on-CPU",
	profile.FuncRunq:    "waiting on a run queue",
	profile.FuncBlocked: "off-CPU blocked",
}

func timesWords(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f×", r)
	}
	return fmt.Sprintf("%.1f×", r)
}

func causeName(counter string) string {
	for _, c := range causes {
		if c.counter == counter {
			return c.cause
		}
	}
	return counter
}

func causeAdvice(tc TailCompare) string {
	for _, c := range causes {
		if c.counter == tc.Cause {
			return c.advice
		}
	}
	return timeCause[tc.TimeCounter].advice
}

func isTime(counter string) bool {
	for _, t := range timeCounters {
		if t == counter {
			return true
		}
	}
	return false
}

func zeroNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// bucketOf is the bucket holding the q-quantile's rank.
func bucketOf(h []uint64, q float64) int {
	var total uint64
	for _, c := range h {
		total += c
	}
	rank := q * float64(total)
	var cum float64
	for i, c := range h {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= rank {
			return i
		}
		cum += float64(c)
	}
	return len(h) - 1
}

func sumBuckets(a *profile.FunctionAgg, from, to int) profile.FunctionBucket {
	out := profile.FunctionBucket{Sums: make([]uint64, len(a.Spec.Counters))}
	for b := from; b <= to; b++ {
		if fb := a.ByBucket[b]; fb != nil {
			out.Add(*fb)
		}
	}
	return out
}

func evalFunctionTail(m *Metrics, r *Rule) []Finding {
	callsT, factorT, countedT := r.T(mCalls), r.T(mTailMeanOverMedian), r.T(mTailCounted)
	var out []Finding
	for _, a := range m.functions {
		tc, ok := CompareTail(a)
		if !ok {
			continue
		}
		ev, pass := allPass(
			callsT, float64(tc.Calls),
			factorT, ratio(tc.TailLatency, tc.MedianLatency),
			countedT, float64(tc.TailCounted),
		)
		if !pass {
			continue
		}
		if row, ok := tc.row(tc.TimeCounter); ok {
			ev = append(ev, Evidence{Metric: metric.ID(row.Counter + " share of the extra time"), Value: row.Share, Unit: metric.UnitRatio, Op: ">", Threshold: 0})
		}
		if row, ok := tc.row(tc.Cause); ok {
			ev = append(ev,
				Evidence{Metric: metric.ID(row.Counter + " per call, tail over median"), Value: row.Ratio, Threshold: tailCauseRatio, Op: ">=", Unit: metric.UnitTimes},
				Evidence{Metric: metric.ID(row.Counter + " per call, tail minus median"), Value: row.Tail - row.Median, Threshold: tailCauseExcess, Op: ">=", Unit: metric.UnitEvents},
			)
		}
		out = append(out, Finding{
			Severity: severity(factorT, ratio(tc.TailLatency, tc.MedianLatency)),
			Scope:    Scope{Functions: []string{tc.Function}, CPUs: []int{}},
			Evidence: ev,
			Advice:   tc.Verdict() + ". " + causeAdvice(tc),
		})
	}
	return out
}
