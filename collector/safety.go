package collector

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// CommandGrace is how long a command target has to exit after SIGTERM when
// the recording ends before it does; then its process group gets SIGKILL.
const CommandGrace = 2 * time.Second

// maxSampleRateFile is the kernel's limit on a perf event's sampling
// frequency; perf_event_open answers EINVAL above it.
const maxSampleRateFile = "/proc/sys/kernel/perf_event_max_sample_rate"

// HighSampleHz is the sampling frequency above which the recorder may not
// keep up on a busy host: each sample is a stack walk in the kernel and
// work in the recorder, and above it windows stretch and -d runs over
// (BENCHMARKS.md has the measurements).
const HighSampleHz = 10000

// ClampSampleRate lowers -F to the kernel's perf_event_max_sample_rate,
// as perf record does (perf_event_open would refuse it with "invalid
// argument"), and says so; it also notes a frequency above HighSampleHz.
func ClampSampleRate(hz int) (int, string) {
	b, err := os.ReadFile(maxSampleRateFile)
	limit, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err == nil && perr == nil && limit > 0 && hz > limit {
		return limit, fmt.Sprintf("-F %d Hz is above this kernel's limit of %d Hz (%s; the kernel lowers it when sampling takes too long): sampling at %d Hz", hz, limit, maxSampleRateFile, limit)
	}
	if hz > HighSampleHz {
		return hz, fmt.Sprintf("-F %d Hz: above %d Hz per CPU the recorder may fall behind on a busy host (windows stretch and -d runs over); 99 to 999 Hz is what profiling needs", hz, HighSampleHz)
	}
	return hz, ""
}

// unsupportedReasons lists the distinct reasons of the events not measured.
func unsupportedReasons(statuses []profile.EventStatus) []string {
	seen := map[string]bool{}
	var rs []string
	for _, st := range statuses {
		if st.Status != profile.StatusMeasured && !seen[st.Reason] {
			seen[st.Reason] = true
			rs = append(rs, st.Reason)
		}
	}
	return rs
}
