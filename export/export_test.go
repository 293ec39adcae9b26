package export

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/cacheheat/cacheheat/heatmap/synth"
	"github.com/cacheheat/cacheheat/profile"
)

// total sums a recording's samples of event in windows starting in
// [from, to) for pid (0: all).
func total(rec *profile.Recording, event string, from, to time.Duration, pid int) uint64 {
	var n uint64
	for _, w := range rec.Windows {
		if w.StartNS < int64(from) || (to > 0 && w.StartNS >= int64(to)) {
			continue
		}
		for _, s := range w.Samples {
			if s.Event == event && (pid == 0 || s.PID == pid) {
				n += s.Count
			}
		}
	}
	return n
}

// foldedSum parses folded output and sums its counts.
func foldedSum(t *testing.T, out string) (sum uint64, lines []string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		i := strings.LastIndexByte(l, ' ')
		n, err := strconv.ParseUint(l[i+1:], 10, 64)
		if i < 0 || err != nil {
			t.Fatalf("folded line %q has no count", l)
		}
		sum += n
		lines = append(lines, l[:i])
	}
	return sum, lines
}

func TestFoldedSumsToTheSampleTotal(t *testing.T) {
	rec := synth.Recording(synth.Default())
	for _, o := range []Options{{}, {From: 2 * time.Second, To: 4 * time.Second}, {PID: 1010}} {
		var buf bytes.Buffer
		if err := Folded(&buf, FromRecording(rec, o)); err != nil {
			t.Fatal(err)
		}
		sum, lines := foldedSum(t, buf.String())
		want := total(rec, "cpu-clock", o.From, o.To, o.PID)
		if want == 0 || sum != want {
			t.Errorf("%+v: folded sums to %d, recording has %d cpu-clock samples", o, sum, want)
		}
		for _, l := range lines {
			if o.PID != 0 && !strings.HasPrefix(l, "o3-synth-1;") {
				t.Errorf("--pid %d kept %q", o.PID, l)
			}
		}
		// Outermost first: every synthetic user stack starts at main.main.
		if !strings.Contains(lines[0], ";main.main;main.run;") {
			t.Errorf("first line %q is not root-first", lines[0])
		}
	}
}

func TestFoldedEscapesSeparators(t *testing.T) {
	o := synth.Default()
	o.Names = []string{"evil;comm\nx", "f;g"}
	rec := synth.Recording(o)
	var buf bytes.Buffer
	if err := Folded(&buf, FromRecording(rec, Options{})); err != nil {
		t.Fatal(err)
	}
	sum, lines := foldedSum(t, buf.String())
	if sum != total(rec, "cpu-clock", 0, 0, 0) {
		t.Errorf("sum %d, want %d", sum, total(rec, "cpu-clock", 0, 0, 0))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "evil_comm_x;") && !strings.HasPrefix(l, "f_g;") {
			t.Fatalf("line %q: comm not escaped", l)
		}
	}
	if !strings.Contains(buf.String(), ";f_g") {
		t.Errorf("a function named f;g was not escaped:\n%s", buf.String())
	}
}

func TestPprof(t *testing.T) {
	rec := synth.Recording(synth.Default())
	id := rec.Windows[0].Samples[0].UserStack
	rec.Windows[0].Samples = append(rec.Windows[0].Samples,
		profile.Sample{Event: "page-faults", PID: 1000, TID: 1000, CPU: 1, UserStack: id, Count: 3})
	rec.Header.Settings.SamplePeriod = 100
	st := rec.Stacks[id]
	st.Frames = append([]profile.Frame(nil), st.Frames...)
	st.Frames[1].BuildID = "abc123"
	rec.Stacks[id] = st
	var buf bytes.Buffer
	if err := Pprof(&buf, FromRecording(rec, Options{})); err != nil {
		t.Fatal(err)
	}
	p, err := pprof.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	want := "cpu-clock samples/count cpu-clock/nanoseconds page-faults samples/count page-faults/events"
	if strings.Join(types, " ") != want {
		t.Fatalf("sample types %v, want %s", types, want)
	}
	if p.DefaultSampleType != "cpu-clock" {
		t.Errorf("default sample type %q", p.DefaultSampleType)
	}
	sums := make([]int64, 4)
	for _, s := range p.Sample {
		for i, v := range s.Value {
			sums[i] += v
		}
		if s.Label["comm"][0] == "" || len(s.Label["pid"]) != 1 || len(s.Label["tid"]) != 1 || len(s.Label["cpu"]) != 1 || len(s.Label["node"]) != 1 {
			t.Fatalf("sample labels %v", s.Label)
		}
		cpu, _ := strconv.Atoi(s.Label["cpu"][0])
		if node := s.Label["node"][0]; node != strconv.Itoa(rec.Header.Host.Topology.NodeOf()[cpu]) {
			t.Errorf("cpu %d labelled node %s", cpu, node)
		}
	}
	n := int64(total(rec, "cpu-clock", 0, 0, 0))
	if sums[0] != n || sums[1] != n*(int64(time.Second)/99) || sums[2] != 3 || sums[3] != 300 {
		t.Errorf("value sums %v, want [%d %d 3 300]", sums, n, n*(int64(time.Second)/99))
	}
	var ids []string
	for _, m := range p.Mapping {
		ids = append(ids, m.File+"@"+m.BuildID)
	}
	if !strings.Contains(strings.Join(ids, " "), "/usr/bin/o3-synth@abc123") {
		t.Errorf("mappings %v lack the build id", ids)
	}
}

func TestPprofCgroupLabel(t *testing.T) {
	for _, kind := range []string{profile.TargetCgroup, profile.TargetAll} {
		rec := synth.Recording(synth.Default())
		rec.Header.Target = profile.Target{Kind: kind, Cgroup: "system.slice/x.service"}
		var buf bytes.Buffer
		if err := Pprof(&buf, FromRecording(rec, Options{})); err != nil {
			t.Fatal(err)
		}
		p, err := pprof.Parse(&buf)
		if err != nil {
			t.Fatal(err)
		}
		got := p.Sample[0].Label["cgroup"]
		if (kind == profile.TargetCgroup) != (len(got) == 1 && got[0] == "system.slice/x.service") {
			t.Errorf("target %s: cgroup label %v", kind, got)
		}
	}
}
