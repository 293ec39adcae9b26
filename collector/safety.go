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

// CheckSampleRate refuses -F above the kernel's perf_event_max_sample_rate,
// naming the limit (the kernel itself would only say "invalid argument").
func CheckSampleRate(hz int) error {
	b, err := os.ReadFile(maxSampleRateFile)
	if err != nil {
		return nil // no limit to read: the kernel will say
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || limit <= 0 || hz <= limit {
		return nil
	}
	return fmt.Errorf("-F %d Hz is above this kernel's limit of %d Hz (%s; the kernel lowers it when sampling takes too long): use -F %d or less", hz, limit, maxSampleRateFile, limit)
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

// stretchCount counts the windows that lasted much longer than the
// interval (profile.IsStretched), for the trailer's warning.
type stretchCount struct {
	stretched int
	longestNS int64
}

func (s *stretchCount) add(lengthNS, intervalNS int64) {
	s.longestNS = max(s.longestNS, lengthNS)
	if profile.IsStretched(lengthNS, intervalNS) {
		s.stretched++
	}
}

// warning is the trailer's warning, or "" when no window was stretched.
func (s stretchCount) warning(windows int) string {
	return profile.Stretch{Windows: windows, Stretched: s.stretched, LongestNS: s.longestNS}.String()
}
