package collector

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MetricsEnv names the file a recorded command appends `name value` lines
// to (workloads.MetricsEnv is the same name, seen from the other side).
const MetricsEnv = "CACHEHEAT_METRICS"

// Bounds on what a target can make the recorder hold: the metrics file is
// written by the recorded program, which may be buggy or hostile.
const (
	// maxAppMetricNames is how many distinct names are kept; lines with
	// further names are dropped and counted.
	maxAppMetricNames = 1000
	// maxAppMetricLine is the longest line read; longer ones are
	// dropped and counted without being held in memory.
	maxAppMetricLine = 4 << 10
	// appMetricsChunk is how much is read from the file at a time.
	appMetricsChunk = 64 << 10
	// maxAppMetricsPoll is the most read of the file per window: what a
	// target writes beyond it is skipped (and counted), so no file, a
	// 2 TB sparse one included, can delay a window or the recording's
	// end.
	maxAppMetricsPoll = 1 << 20
)

// appMetrics tails the metrics file of a command target. Each window takes
// the last value of each name written during it; a line that is not
// `name value` is counted, never dropped silently, and so are lines over
// maxAppMetricLine bytes and names beyond maxAppMetricNames.
type appMetrics struct {
	path      string
	f         *os.File
	partial   []byte // an unfinished last line, completed by a later write
	skipping  bool   // inside a line longer than maxAppMetricLine
	final     map[string]float64
	malformed int
	example   string
	long      int   // lines longer than maxAppMetricLine
	overNames int   // lines dropped because maxAppMetricNames was reached
	skipped   int64 // bytes jumped over, beyond maxAppMetricsPoll in a poll
	buf       []byte
}

// newAppMetrics creates a fresh, empty metrics file beside the recording
// (or in $TMPDIR when that directory is not writable), owned by uid/gid
// when they are >= 0 so a command run as the sudo user can write it.
func newAppMetrics(recording string, uid, gid int) (*appMetrics, error) {
	var f *os.File
	var err error
	for _, dir := range []string{filepath.Dir(recording), os.TempDir()} {
		f, err = os.CreateTemp(dir, ".cacheheat-metrics-*")
		if err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("creating the app metrics file: %w", err)
	}
	if uid >= 0 {
		if err := f.Chown(uid, gid); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, fmt.Errorf("handing the app metrics file to uid %d: %w", uid, err)
		}
	}
	return &appMetrics{path: f.Name(), f: f, final: map[string]float64{}}, nil
}

// env is the environment entry that tells the command where to write.
func (a *appMetrics) env() string { return MetricsEnv + "=" + a.path }

// poll reads what was appended since the last poll and returns the last
// value of each name seen in it. An unfinished last line waits for the next
// poll, except in the final one (last), where it counts as a line. Memory
// stays bounded whatever the file holds: it is read in chunks, and a line
// is kept only up to maxAppMetricLine bytes. So does time: a poll reads at
// most maxAppMetricsPoll bytes; with more written since, it jumps to the
// file's last appMetricsChunk bytes, the newest values, and counts what it
// skipped.
func (a *appMetrics) poll(last bool) map[string]float64 {
	var out map[string]float64
	if a.buf == nil {
		a.buf = make([]byte, appMetricsChunk)
	}
	if a.read(maxAppMetricsPoll, &out) >= maxAppMetricsPoll {
		at, err1 := a.f.Seek(0, io.SeekCurrent)
		end, err2 := a.f.Seek(0, io.SeekEnd)
		if tail := end - appMetricsChunk; err1 == nil && err2 == nil && tail > at {
			a.skipped += tail - at
			// The line the jump lands in is cut: drop it.
			a.skipping, a.partial = true, a.partial[:0]
			if _, err := a.f.Seek(tail, io.SeekStart); err == nil {
				a.read(appMetricsChunk, &out)
			}
		} else if err1 == nil {
			_, _ = a.f.Seek(at, io.SeekStart)
		}
	}
	if last && (len(a.partial) > 0 || a.skipping) {
		a.scan([]byte{'\n'}, &out)
	}
	return out
}

// read scans up to limit bytes (rounded up to a chunk) from the file's
// offset, or to its end, and returns how many it read.
func (a *appMetrics) read(limit int, out *map[string]float64) int {
	read := 0
	for read < limit {
		n, err := a.f.Read(a.buf)
		read += n
		a.scan(a.buf[:n], out)
		if err != nil || n == 0 {
			break
		}
	}
	return read
}

// scan splits data into lines, joining the partial line of the previous
// call, and takes each complete line's metric into out and a.final.
func (a *appMetrics) scan(data []byte, out *map[string]float64) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		chunk := data
		if i >= 0 {
			chunk = data[:i]
		}
		if !a.skipping {
			if len(a.partial)+len(chunk) > maxAppMetricLine {
				a.skipping, a.partial = true, a.partial[:0]
			} else {
				a.partial = append(a.partial, chunk...)
			}
		}
		if i < 0 {
			return
		}
		data = data[i+1:]
		if a.skipping {
			a.skipping = false
			a.long++
			continue
		}
		line := strings.TrimSpace(string(a.partial))
		a.partial = a.partial[:0]
		if line != "" {
			a.take(line, out)
		}
	}
}

// take records one line's metric.
func (a *appMetrics) take(line string, out *map[string]float64) {
	name, val, ok := parseMetric(line)
	if !ok {
		a.malformed++
		if a.example == "" {
			a.example = line
		}
		return
	}
	if _, known := a.final[name]; !known && len(a.final) >= maxAppMetricNames {
		a.overNames++
		return
	}
	if *out == nil {
		*out = map[string]float64{}
	}
	(*out)[name] = val
	a.final[name] = val
}

func parseMetric(line string) (string, float64, bool) {
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(fields[1], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return "", 0, false
	}
	return fields[0], v, true
}

// warning describes the lines dropped, or is empty when there were none.
func (a *appMetrics) warning() string {
	var parts []string
	if a.malformed > 0 {
		ex := a.example
		if len(ex) > 80 {
			ex = ex[:80] + "..."
		}
		parts = append(parts, fmt.Sprintf("%d malformed lines ignored (want 'name value'; first: %q)", a.malformed, ex))
	}
	if a.long > 0 {
		parts = append(parts, fmt.Sprintf("%d lines longer than %d bytes dropped", a.long, maxAppMetricLine))
	}
	if a.skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes skipped (more than %d bytes written in one window)", a.skipped, maxAppMetricsPoll))
	}
	if a.overNames > 0 {
		parts = append(parts, fmt.Sprintf("%d lines dropped because they named metrics beyond the first %d distinct names", a.overNames, maxAppMetricNames))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("app metrics in %s: %s", MetricsEnv, strings.Join(parts, "; "))
}

// close removes the metrics file.
func (a *appMetrics) close() {
	a.f.Close()
	os.Remove(a.path)
}
