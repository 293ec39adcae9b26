package profile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func writeTestRecording(t *testing.T, path string, windows int, finish bool) {
	t.Helper()
	writeTestRecordingVersion(t, path, windows, finish, FormatMajor)
}

func writeTestRecordingVersion(t *testing.T, path string, windows int, finish bool, major int) {
	t.Helper()
	w, err := CreateVersion(path, testHeader(), major)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < windows; i++ {
		win := testWindow(i)
		if err := w.WriteWindow(&win); err != nil {
			t.Fatal(err)
		}
	}
	if finish {
		exit := 3
		if err := w.Close(Trailer{EndReason: EndTargetExit, EndTime: time.Date(2026, 12, 2, 10, 0, 5, 0, time.UTC), ExitStatus: &exit, AppMetrics: map[string]float64{"ops_per_sec": 1002}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, major := range []int{1, 2} {
		t.Run(fmt.Sprint("v", major), func(t *testing.T) { testRoundTrip(t, major) })
	}
}

func testRoundTrip(t *testing.T, major int) {
	path := filepath.Join(t.TempDir(), "r.rec")
	writeTestRecordingVersion(t, path, 3, true, major)
	if p := PartialFiles(path); len(p) != 0 {
		t.Fatalf("partial file left behind after Close: %v", p)
	}
	rec, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Truncated || rec.Warning != "" {
		t.Fatalf("finished recording read as truncated: %q", rec.Warning)
	}
	want := testHeader()
	want.FormatVersion = fmt.Sprintf("%d.%d", major, formatMinor[major])
	if !reflect.DeepEqual(rec.Header, want) {
		t.Errorf("header differs:\n got %+v\nwant %+v", rec.Header, want)
	}
	if len(rec.Windows) != 3 {
		t.Fatalf("got %d windows, want 3", len(rec.Windows))
	}
	for i, got := range rec.Windows {
		w := testWindow(i)
		w.Index = i
		w.NewStacks = nil
		if !reflect.DeepEqual(got, w) {
			t.Errorf("window %d differs:\n got %+v\nwant %+v", i, got, w)
		}
	}
	// Stack 1 and 2 are defined by every window but must be stored once;
	// every referenced stack must be readable.
	if len(rec.Stacks) != 2+3 {
		t.Errorf("got %d stacks, want 5", len(rec.Stacks))
	}
	if rec.Stacks[1].Frames[0].Function != "main.work" {
		t.Errorf("stack 1 = %+v", rec.Stacks[1])
	}
	if rec.Trailer == nil || rec.Trailer.EndReason != EndTargetExit || *rec.Trailer.ExitStatus != 3 || rec.Trailer.Windows != 3 {
		t.Errorf("trailer = %+v", rec.Trailer)
	}
}

func TestStacksWrittenOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.rec")
	writeTestRecording(t, path, 2, true)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := NewDecoder(f)
	if err != nil {
		t.Fatal(err)
	}
	w0, _, _ := d.Next()
	w1, _, _ := d.Next()
	if len(w0.NewStacks) != 3 || len(w1.NewStacks) != 1 {
		t.Errorf("new stacks per window = %d, %d; want 3, 1", len(w0.NewStacks), len(w1.NewStacks))
	}
}

func TestTruncatedAtEveryByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.rec")
	writeTestRecording(t, path, 3, true)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Record boundaries: after each record, the number of windows readable.
	full, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	prevWindows := -1
	for n := 0; n < len(data); n++ {
		rec, err := Read(bytes.NewReader(data[:n]))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("cut at %d: error %v does not wrap ErrFormat", n, err)
			}
			if prevWindows >= 0 {
				t.Fatalf("cut at %d: error %v after the header was readable", n, err)
			}
			continue
		}
		if !rec.Truncated || !strings.Contains(rec.Warning, "complete windows") {
			t.Fatalf("cut at %d: not flagged truncated (warning %q)", n, rec.Warning)
		}
		if len(rec.Windows) < prevWindows {
			t.Fatalf("cut at %d: %d windows, fewer than a shorter cut", n, len(rec.Windows))
		}
		prevWindows = len(rec.Windows)
		for i, w := range rec.Windows {
			if !reflect.DeepEqual(w, full.Windows[i]) {
				t.Fatalf("cut at %d: window %d differs from the full file", n, i)
			}
		}
	}
	if prevWindows != 3 {
		t.Errorf("longest cut read %d windows, want 3", prevWindows)
	}
}

func TestRejects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.rec")
	writeTestRecording(t, path, 1, true)
	good, _ := os.ReadFile(path)
	future := append([]byte(nil), good...)
	future[8] = 3 // major version 3
	for name, tc := range map[string]struct {
		data []byte
		msg  string
	}{
		"empty":     {nil, "empty file"},
		"garbage":   {[]byte("hello, this is not a recording at all"), "bad magic"},
		"short":     {[]byte("CHEAT"), "too short"},
		"version":   {future, fmt.Sprintf("version 3.%d is not supported", FormatMinor)},
		"no header": {append([]byte(magic), 1, 0, 0, 0), "reading header"},
	} {
		_, err := Read(bytes.NewReader(tc.data))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want ErrFormat mentioning %q", name, err, tc.msg)
		}
	}
}

func TestCorruptWindowStopsThere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.rec")
	writeTestRecording(t, path, 3, true)
	data, _ := os.ReadFile(path)
	// Flip a byte in the last record before the trailer: find the third
	// window by decoding record offsets.
	offs := recordOffsets(t, data)
	bad := append([]byte(nil), data...)
	bad[offs[3]+recHeadLen+2] ^= 0xff // third window's payload
	rec, err := Read(bytes.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Windows) != 2 || !rec.Truncated || !strings.Contains(rec.Warning, "checksum") {
		t.Errorf("windows=%d truncated=%v warning=%q", len(rec.Windows), rec.Truncated, rec.Warning)
	}
}

// recordOffsets returns the byte offset of each record.
func recordOffsets(t *testing.T, data []byte) []int {
	var offs []int
	for o := 12; o+recHeadLen <= len(data); {
		offs = append(offs, o)
		n := int(uint32(data[o+1]) | uint32(data[o+2])<<8 | uint32(data[o+3])<<16 | uint32(data[o+4])<<24)
		o += recHeadLen + n
	}
	return offs
}

func TestMissingFileNamesPartial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.rec")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	win := testWindow(0)
	if err := w.WriteWindow(&win); err != nil {
		t.Fatal(err)
	}
	_, err = ReadFile(path)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), PartialSuffix) {
		t.Errorf("err = %v, want not-exist naming the .partial file", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadFile(path)
	if err != nil || !rec.Truncated || len(rec.Windows) != 1 {
		t.Fatalf("after Abort: rec=%v err=%v", rec, err)
	}
}

// TestSIGKILLWriter kills a real writer process mid-stream and reads every
// window it reported complete.
func TestSIGKILLWriter(t *testing.T) {
	if os.Getenv("CACHEHEAT_TEST_WRITER") != "" {
		runWriterChild(os.Getenv("CACHEHEAT_TEST_WRITER"))
		return
	}
	path := filepath.Join(t.TempDir(), "r.rec")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILLWriter$")
	cmd.Env = append(os.Environ(), "CACHEHEAT_TEST_WRITER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	written := 0
	for sc.Scan() {
		if n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "wrote ")); err == nil {
			written = n
			if written >= 5 {
				break
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	partial := PartialFiles(path)
	if len(partial) != 1 {
		t.Fatalf("partial files %v, want one", partial)
	}
	rec, err := ReadFile(partial[0])
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Truncated || rec.Trailer != nil {
		t.Errorf("killed recording: truncated=%v trailer=%v", rec.Truncated, rec.Trailer)
	}
	if len(rec.Windows) < written {
		t.Fatalf("read %d windows, the writer had completed %d", len(rec.Windows), written)
	}
	for i, w := range rec.Windows {
		if w.Index != i || w.Counters[0].PerCPU[0] != uint64(900e6+i) {
			t.Fatalf("window %d damaged: %+v", i, w)
		}
	}
}

func runWriterChild(path string) {
	w, err := Create(path, testHeader())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		win := testWindow(i)
		if err := w.WriteWindow(&win); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %d\n", i+1)
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSummarize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.rec")
	writeTestRecording(t, path, 3, true)
	rec, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(rec)
	if s.FormatVersion != "2" || s.Windows != 3 || s.DurationS != 3 || s.EndReason != EndTargetExit || s.IntervalS != 1 {
		t.Errorf("summary basics: %+v", s)
	}
	pf := s.Totals["page-faults"]
	if pf.Total != 0+10+20+3*3 || pf.PerCPU["1"] != 9 || pf.PerNode["0"] != pf.Total {
		t.Errorf("page-faults totals = %+v", pf)
	}
	if s.HostTotals["page-faults"].Total != 450 {
		t.Errorf("host page-faults = %d, want 450", s.HostTotals["page-faults"].Total)
	}
	if len(s.Processes) != 1 || s.Processes[0].Totals["page-faults"] != 39 || s.Processes[0].Comm != "o3-test" || s.Processes[0].Samples != 3*99 {
		t.Errorf("processes = %+v", s.Processes)
	}
	if s.Samples.Total != 3*99 || s.Samples.TopFunctions[0].Name != "main.work" || s.Samples.TopFunctions[0].Samples != 270 {
		t.Errorf("samples = %+v", s.Samples)
	}
	if s.Samples.Dropped != 0+1+2 || s.Drops.StackErrors != 3 {
		t.Errorf("dropped = %d", s.Samples.Dropped)
	}
	if len(s.Histograms) != 1 || s.Histograms[0].Count != 27 {
		t.Fatalf("histograms = %+v", s.Histograms)
	}
	// 15 of 27 values in [1024, 2048), 12 in [2048, 4096): p50 lies in
	// the first bucket, p99 in the second.
	if h := s.Histograms[0]; h.P50 < 1024 || h.P50 >= 2048 || h.P99 < 2048 || h.P99 >= 4096 || h.Max != 4096 {
		t.Errorf("percentiles = %+v", h)
	}
	if s.AppMetrics["ops_per_sec"] != 1002 {
		t.Errorf("app metrics = %v", s.AppMetrics)
	}
}

func TestPercentile(t *testing.T) {
	b := make([]uint64, HistBuckets)
	if Percentile(b, 0.5) != 0 {
		t.Error("empty histogram")
	}
	b[3] = 4 // values in [8, 16)
	for q, want := range map[float64]float64{0.25: 10, 0.5: 12, 1: 16} {
		if got := Percentile(b, q); got != want {
			t.Errorf("p%v = %v, want %v", q, got, want)
		}
	}
}

func TestFrameString(t *testing.T) {
	for f, want := range map[Frame]string{
		{Function: "main.f", Module: "/bin/x"}:     "main.f",
		{Module: "/lib/libc.so.6", Offset: 0x1a2b}: "/lib/libc.so.6+0x1a2b",
		{Offset: 0x10}: "[unknown]+0x10",
	} {
		if got := f.String(); got != want {
			t.Errorf("%+v: %q, want %q", f, got, want)
		}
	}
}

func TestCheckValid(t *testing.T) {
	base := func() *Recording {
		w := testWindow(0)
		return &Recording{Header: testHeader(), Windows: []Window{w}, Stacks: map[uint64]Stack{1: {ID: 1}, 2: {ID: 2}, 100: {ID: 100}}}
	}
	if err := base().CheckValid(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(r *Recording){
		"cpu id":        func(r *Recording) { r.Header.Host.Topology.CPUs[0].ID = -1 },
		"dup cpu":       func(r *Recording) { r.Header.Host.Topology.CPUs[1].ID = 0 },
		"unknown node":  func(r *Recording) { r.Header.Host.Topology.CPUs[0].Node = 7 },
		"wide counter":  func(r *Recording) { r.Windows[0].Counters[0].PerCPU = make([]uint64, 3) },
		"many buckets":  func(r *Recording) { r.Windows[0].Histograms[0].PerCPU[0] = make([]uint64, HistBuckets+1) },
		"sample cpu":    func(r *Recording) { r.Windows[0].Samples[0].CPU = 5 },
		"missing stack": func(r *Recording) { delete(r.Stacks, 1) },
		"time order":    func(r *Recording) { r.Windows[0].EndNS = -1 },
	} {
		r := base()
		mutate(r)
		if err := r.CheckValid(); err == nil {
			t.Errorf("%s: CheckValid accepted an invalid recording", name)
		}
	}
}

func TestWriterErrorsOnBadPath(t *testing.T) {
	_, err := Create(filepath.Join(t.TempDir(), "no", "such", "dir", "r.rec"), testHeader())
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v", err)
	}
	_ = io.EOF
}

func TestCountsJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Counts
		bad  bool
	}{
		{in: `[1,2,3]`, want: Counts{1, 2, 3}},
		{in: ` [ 0 , 18446744073709551615 ] `, want: Counts{0, 1<<64 - 1}},
		{in: `[]`, want: Counts{}},
		{in: `null`, want: nil},
		{in: `[18446744073709551616]`, bad: true},
		{in: `[-1]`, bad: true},
		{in: `[1.5]`, bad: true},
		{in: `{"a":1}`, bad: true},
		{in: `"12"`, bad: true},
	} {
		var c Counts
		err := json.Unmarshal([]byte(tc.in), &c)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted as %v", tc.in, c)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(c, tc.want) {
			t.Errorf("%s: got %v, %v; want %v", tc.in, c, err, tc.want)
		}
		out, _ := json.Marshal(tc.want)
		var back Counts
		if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, tc.want) {
			t.Errorf("%v: round trip gave %v (%s)", tc.want, back, out)
		}
	}
}
