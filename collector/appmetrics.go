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

// appMetrics tails the metrics file of a command target. Each window takes
// the last value of each name written during it; a line that is not
// `name value` is counted, never dropped silently.
type appMetrics struct {
	path      string
	f         *os.File
	partial   []byte // an unfinished last line, completed by a later write
	final     map[string]float64
	malformed int
	example   string
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
// poll, except in the final one (last), where it counts as a line.
func (a *appMetrics) poll(last bool) map[string]float64 {
	data, _ := io.ReadAll(a.f)
	data = append(a.partial, data...)
	a.partial = nil
	if last && len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	var out map[string]float64
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			a.partial = append([]byte(nil), data...)
			break
		}
		line := strings.TrimSpace(string(data[:i]))
		data = data[i+1:]
		if line == "" {
			continue
		}
		name, val, ok := parseMetric(line)
		if !ok {
			a.malformed++
			if a.example == "" {
				a.example = line
			}
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[name] = val
		a.final[name] = val
	}
	return out
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

// warning describes the malformed lines, or is empty when there were none.
func (a *appMetrics) warning() string {
	if a.malformed == 0 {
		return ""
	}
	ex := a.example
	if len(ex) > 80 {
		ex = ex[:80] + "..."
	}
	return fmt.Sprintf("app metrics: %d malformed lines ignored in %s (want 'name value'; first: %q)", a.malformed, MetricsEnv, ex)
}

// close removes the metrics file.
func (a *appMetrics) close() {
	a.f.Close()
	os.Remove(a.path)
}
