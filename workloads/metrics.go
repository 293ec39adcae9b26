package workloads

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// MetricsEnv names the environment variable that, when it names a file,
// makes a running workload append its rate there for the recorder.
const MetricsEnv = "CACHEHEAT_METRICS"

// MetricsInterval is how often the running total of ops is appended. A
// reader that takes the last total of each of its windows (the recorder,
// every 250 ms by default) then counts a window's ops with an error of at
// most one interval's work at each end: the rate over a window is its
// counts' own, not the rate of some other 250 ms that the window overlaps.
const MetricsInterval = 25 * time.Millisecond

// startMetrics appends "ops_total N" (the ops done so far, a counter) to
// path every MetricsInterval. The returned stop function ends that and
// appends, when final, the last "ops_total" and the whole run's
// "ops_per_sec V" and "ns_per_op V". Each line is one write to an O_APPEND
// file, so a reader tailing it never sees half a line from us. An empty
// path does nothing.
func startMetrics(path string, p *progress) (stop func(final bool, opsPerSec, nsPerOp float64) error, err error) {
	if path == "" {
		return func(bool, float64, float64) error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening metrics file %s: %w", path, err)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var werr error
	write := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := f.WriteString(line); err != nil && werr == nil {
			werr = fmt.Errorf("writing metrics file %s: %w", path, err)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(MetricsInterval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				write(fmt.Sprintf("ops_total %d\n", p.total()))
			}
		}
	}()
	return func(final bool, opsPerSec, nsPerOp float64) error {
		close(quit)
		wg.Wait()
		if final {
			write(fmt.Sprintf("ops_total %d\n", p.total()))
			write(fmt.Sprintf("ops_per_sec %g\n", opsPerSec))
			write(fmt.Sprintf("ns_per_op %g\n", nsPerOp))
		}
		if err := f.Close(); err != nil && werr == nil {
			werr = fmt.Errorf("closing metrics file %s: %w", path, err)
		}
		return werr
	}, nil
}
