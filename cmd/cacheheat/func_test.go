package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// The --func acceptance tests record the programs in testdata/funclat
// (built here with the system's C compiler and with go) and check the
// calls counted, the per-bucket counters, the function-tail finding and
// agreement with bpftrace.

// buildC compiles testdata/funclat/work.c.
func buildC(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			t.Skip("needs a C compiler (cc or gcc) to build the test program")
		}
	}
	bin := filepath.Join(t.TempDir(), "cwork")
	if out, err := exec.Command(cc, "-O2", "-o", bin, "testdata/funclat/work.c").CombinedOutput(); err != nil {
		t.Fatalf("building work.c: %v\n%s", err, out)
	}
	return bin
}

// buildGo builds testdata/funclat/gowork.go.
func buildGo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gowork")
	if out, err := exec.Command("go", "build", "-o", bin, "testdata/funclat/gowork.go").CombinedOutput(); err != nil {
		t.Fatalf("building gowork.go: %v\n%s", err, out)
	}
	return bin
}

// funcSummary is the part of inspect --json these tests read.
type funcSummary struct {
	ExitStatus *int `json:"exit_status"`
	Functions  []struct {
		Name      string                       `json:"name"`
		Lang      string                       `json:"lang"`
		Calls     uint64                       `json:"calls"`
		P50       float64                      `json:"p50"`
		P99       float64                      `json:"p99"`
		Buckets   []uint64                     `json:"buckets"`
		ByBucket  map[string]map[string]uint64 `json:"by_bucket"`
		Entries   uint64                       `json:"entries"`
		Unmatched uint64                       `json:"unmatched"`
		Abandoned uint64                       `json:"abandoned"`
	} `json:"functions"`
}

// recordFunc records prog under --func sym and returns the recording's
// path, the program's stdout and inspect --json.
func recordFunc(t *testing.T, sym string, prog ...string) (string, string, funcSummary) {
	t.Helper()
	return recordFuncFlags(t, nil, sym, prog...)
}

// recordFuncFlags is recordFunc with more record flags.
func recordFuncFlags(t *testing.T, flags []string, sym string, prog ...string) (string, string, funcSummary) {
	t.Helper()
	bin := cacheheatBinary(t)
	rec := filepath.Join(t.TempDir(), "f.rec")
	args := append([]string{"record", "-q", "-i", "200ms", "--func", sym, "-o", rec}, flags...)
	args = append(append(args, "--"), prog...)
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("record --func %s: %v\n%s", sym, err, stderr.String())
	}
	js, err := exec.Command(bin, "inspect", "--json", rec).Output()
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var s funcSummary
	if err := json.Unmarshal(js, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Functions) == 0 || s.Functions[0].Name != sym {
		t.Fatalf("inspect functions: %+v, want the first named %s", s.Functions, sym)
	}
	return rec, strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]), s
}

// rankBucket is the bucket holding the q-quantile's rank.
func rankBucket(h []uint64, q float64) int {
	var total uint64
	for _, c := range h {
		total += c
	}
	var cum uint64
	for i, c := range h {
		cum += c
		if c > 0 && float64(cum) >= q*float64(total) {
			return i
		}
	}
	return len(h) - 1
}

// TestFuncC: every call of work is counted, the tail buckets carry the
// page faults and analyze says so; a program whose calls are all alike
// gets no page-fault verdict.
func TestFuncC(t *testing.T) {
	needRoot(t)
	prog := buildC(t)
	const n = 2000
	rec, out, s := recordFunc(t, "work", prog, strconv.Itoa(n), "fault")
	f := s.Functions[0]
	if out != strconv.Itoa(n) || f.Calls != n || f.Entries != n || f.Lang != profile.LangC {
		t.Fatalf("program printed %q; recorded %d calls, %d entries (%s), want %d", out, f.Calls, f.Entries, f.Lang, n)
	}
	// Tail: the bucket of p99 and up; median: p50's bucket and its
	// neighbours (attribution's split, recomputed here from the JSON).
	tailFrom, mid := rankBucket(f.Buckets, 0.99), rankBucket(f.Buckets, 0.5)
	var tailCalls, tailFaults, medCalls, medFaults uint64
	for k, b := range f.ByBucket {
		i, _ := strconv.Atoi(k)
		switch {
		case i >= tailFrom:
			tailCalls += b["counted"]
			tailFaults += b[profile.FuncMinFlt]
		case i >= mid-1 && i <= mid+1:
			medCalls += b["counted"]
			medFaults += b[profile.FuncMinFlt]
		}
	}
	if tailCalls == 0 || medCalls == 0 {
		t.Fatalf("tail %d calls from bucket %d, median %d calls around bucket %d: %v", tailCalls, tailFrom, medCalls, mid, f.Buckets)
	}
	tail, med := float64(tailFaults)/float64(tailCalls), float64(medFaults)/float64(medCalls)
	t.Logf("p50 %s p99 %s; minor faults per call: tail %.1f (%d calls), median %.3f (%d calls)", metric.FormatNS(f.P50), metric.FormatNS(f.P99), tail, tailCalls, med, medCalls)
	// 4 MiB is 1024 pages; a fault-free median must still be beaten by
	// a real count, not by a ratio over zero.
	if tail < 100 || tail < 10*med {
		t.Errorf("tail calls have %.1f minor faults per call, median %.3f: want at least 100 and 10x", tail, med)
	}

	res := analyzeJSON(t, rec)
	fnd, ok := findRule(res, "function-tail")
	if !ok {
		t.Fatalf("analyze: no function-tail finding; findings %+v", res.Findings)
	}
	if !strings.Contains(fnd.Advice, "the tail's cause is page faults") || !hasEvidence(fnd, profile.FuncMinFlt) {
		t.Errorf("function-tail does not name page faults: %s %+v", fnd.Advice, fnd.Evidence)
	}

	// Must not fire on faults: the same program with no fault calls.
	rec, _, s = recordFunc(t, "work", prog, strconv.Itoa(n), "flat")
	if s.Functions[0].Calls != n {
		t.Errorf("flat: %d calls, want %d", s.Functions[0].Calls, n)
	}
	if fnd, ok := findRule(analyzeJSON(t, rec), "function-tail"); ok && strings.Contains(fnd.Advice, "page faults") {
		t.Errorf("flat program: function-tail names page faults: %s", fnd.Advice)
	}
}

// TestFuncCRecursionAndLongjmp: recursive calls are each timed, and calls
// that leave work by longjmp are counted as abandoned, not leaked.
func TestFuncCRecursionAndLongjmp(t *testing.T) {
	needRoot(t)
	prog := buildC(t)
	const n = 1000
	_, out, s := recordFunc(t, "work", prog, strconv.Itoa(n), "recurse")
	f := s.Functions[0]
	if want := n + n/10*5; out != strconv.Itoa(want) || f.Calls != uint64(want) || f.Abandoned != 0 || f.Unmatched != 0 {
		t.Errorf("recurse: printed %s; %d calls, %d abandoned, %d unmatched; want %d, 0, 0", out, f.Calls, f.Abandoned, f.Unmatched, want)
	}
	_, out, s = recordFunc(t, "work", prog, strconv.Itoa(n), "longjmp")
	f = s.Functions[0]
	// Every 10th call jumps out; the next call from main at the same
	// stack depth finds its entry and counts it abandoned.
	if want := n - n/10; out != strconv.Itoa(want) || f.Calls != uint64(want) || f.Abandoned != n/10 || f.Entries != n {
		t.Errorf("longjmp: printed %s; %d calls, %d entries, %d abandoned; want %d, %d, %d", out, f.Calls, f.Entries, f.Abandoned, want, n, n/10)
	}
}

// TestFuncGo: a Go function whose goroutine stacks grow during calls runs
// to completion under --func, with every call counted; calls that panic
// out of it are abandoned.
func TestFuncGo(t *testing.T) {
	needRoot(t)
	prog := buildGo(t)
	const n = 2000
	_, out, s := recordFunc(t, "main.work", prog, strconv.Itoa(n))
	f := s.Functions[0]
	if s.ExitStatus == nil || *s.ExitStatus != 0 {
		t.Fatalf("the Go program did not exit 0 under --func: %v", s.ExitStatus)
	}
	// work grows its stack in its own prologue on each goroutine's first
	// call: an entry probe before the stack check would see that call
	// enter twice and count the first entry abandoned.
	if out != strconv.Itoa(n) || f.Calls != n || f.Lang != profile.LangGo || f.Unmatched != 0 || f.Abandoned != 0 {
		t.Errorf("printed %q; %d calls (%s), %d unmatched, %d abandoned; want %d go calls, none lost", out, f.Calls, f.Lang, f.Unmatched, f.Abandoned, n)
	}
	_, out, s = recordFunc(t, "main.work", prog, strconv.Itoa(n), "panic")
	f = s.Functions[0]
	panics := uint64(0)
	for i := 0; i < n; i++ {
		if i%13 == 5 {
			panics++
		}
	}
	// Each of the 4 goroutines' last panic may not be followed by a call.
	if out != strconv.Itoa(n-int(panics)) || f.Calls != n-panics || f.Abandoned > panics || f.Abandoned+4 < panics {
		t.Errorf("panic: printed %s; %d calls, %d abandoned; want %d calls and about %d abandoned", out, f.Calls, f.Abandoned, n-panics, panics)
	}
}

// TestFuncInflightBound: a recursion 20,001 calls deep on four goroutines
// at once overflows the bounded in-flight map. The program still exits 0,
// and every call is either timed or counted as a return without its entry.
func TestFuncInflightBound(t *testing.T) {
	needRoot(t)
	prog := buildGo(t)
	const n = 100
	_, out, s := recordFuncFlags(t, []string{"--func", "main.deep"}, "main.work", prog, strconv.Itoa(n))
	if s.ExitStatus == nil || *s.ExitStatus != 0 || out != strconv.Itoa(n) || len(s.Functions) != 2 {
		t.Fatalf("exit %v, printed %q, %d functions", s.ExitStatus, out, len(s.Functions))
	}
	deepCalls := uint64(0)
	for i := 0; i < n; i++ {
		if i%7 == 0 {
			deepCalls += 20001 // deep(20000) down to deep(0)
		}
	}
	work, deep := s.Functions[0], s.Functions[1]
	if work.Calls+work.Unmatched != n || deep.Calls+deep.Unmatched != deepCalls {
		t.Errorf("work: %d timed + %d unmatched, want %d; deep: %d + %d, want %d", work.Calls, work.Unmatched, n, deep.Calls, deep.Unmatched, deepCalls)
	}
	if deep.Unmatched == 0 {
		t.Errorf("deep: no unmatched return: the in-flight map held %d calls at once?", deepCalls)
	}
}

// TestFuncEvents: --func-events keeps every call, with its counters, in
// the window it returned in.
func TestFuncEvents(t *testing.T) {
	needRoot(t)
	prog := buildC(t)
	const n = 1500
	path, _, s := recordFuncFlags(t, []string{"--func-events"}, "work", prog, strconv.Itoa(n), "fault")
	if s.Functions[0].Calls != n {
		t.Fatalf("%d calls, want %d", s.Functions[0].Calls, n)
	}
	rec, err := profile.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var calls, dropped, faults, faultCalls uint64
	for _, w := range rec.Windows {
		for _, f := range w.Functions {
			dropped += f.EventsDropped
			for _, c := range f.Calls {
				calls++
				// A call is kept in the window it returned in.
				end := c.StartNS + int64(c.LatencyNS)
				if c.LatencyNS == 0 || end < w.StartNS || end > w.EndNS || len(c.Deltas) != len(profile.FunctionCounters) {
					t.Fatalf("call %+v in window [%d, %d]", c, w.StartNS, w.EndNS)
				}
				if d := c.Deltas[3]; d >= 1000 { // minor-faults
					faultCalls++
					faults += d
				}
			}
		}
	}
	// Nothing is lost silently: every call is kept or counted dropped,
	// and the 30 calls that touch 4 MiB each show their 1024 faults.
	if calls+dropped != n || faultCalls != n/50 {
		t.Errorf("%d calls kept, %d dropped (want %d in all); %d calls with >= 1000 faults (want %d)", calls, dropped, n, faultCalls, n/50)
	}
}

// TestFuncCgroup: with -G only the cgroup's calls are timed; a process
// outside it running the same binary adds neither calls nor unmatched
// returns.
func TestFuncCgroup(t *testing.T) {
	needRoot(t)
	prog := buildC(t)
	mount := ""
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[2] == "cgroup2" {
				mount = f[1]
				break
			}
		}
	}
	if mount == "" {
		t.Skip("needs a cgroup v2 file system (none in /proc/self/mounts)")
	}
	dir, err := os.MkdirTemp(mount, "cacheheat-functest-")
	if err != nil {
		t.Skipf("needs a writable cgroup v2 hierarchy at %s: %v", mount, err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	const inside, outside = 700, 900
	var stdins []io.WriteCloser
	var procs []*exec.Cmd
	for _, n := range []int{inside, outside} {
		c := exec.Command(prog, strconv.Itoa(n), "flat", "wait")
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		stdins, procs = append(stdins, in), append(procs, c)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(procs[0].Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "g.rec")
	record := exec.Command(cacheheatBinary(t), "record", "-q", "-i", "100ms", "-G", dir, "--func", prog+":work", "-o", rec)
	var recErr strings.Builder
	record.Stderr = &recErr
	if err := record.Start(); err != nil {
		t.Fatal(err)
	}
	defer record.Process.Kill()
	waitWindows(t, rec, 1)
	for i, in := range stdins {
		in.Write([]byte{'\n'})
		in.Close()
		if err := procs[i].Wait(); err != nil {
			t.Fatalf("test program: %v", err)
		}
	}
	record.Process.Signal(syscall.SIGINT)
	if err := record.Wait(); err != nil {
		t.Fatalf("record: %v\n%s", err, recErr.String())
	}
	js, err := exec.Command(cacheheatBinary(t), "inspect", "--json", rec).Output()
	if err != nil {
		t.Fatal(err)
	}
	var s funcSummary
	if err := json.Unmarshal(js, &s); err != nil {
		t.Fatal(err)
	}
	if f := s.Functions[0]; f.Calls != inside || f.Entries != inside || f.Unmatched != 0 {
		t.Errorf("-G: %d calls, %d entries, %d unmatched; want %d, %d, 0 (the other process made %d calls)", f.Calls, f.Entries, f.Unmatched, inside, inside, outside)
	}
}

// TestFuncAgreesWithBpftrace runs bpftrace's uprobe/uretprobe latency
// histogram on the same process as record --func: p50 and p99 fall in
// the same log2 bucket or a neighbour.
func TestFuncAgreesWithBpftrace(t *testing.T) {
	needRoot(t)
	bt, err := exec.LookPath("bpftrace")
	if err != nil {
		t.Skip("needs bpftrace to compare with")
	}
	prog := buildC(t)
	const n = 2000
	target := exec.Command(prog, strconv.Itoa(n), "fault", "wait")
	stdin, err := target.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	target.Stdout = io.Discard
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer target.Process.Kill()

	script := fmt.Sprintf(`BEGIN { printf("ready\n"); }
uprobe:%[1]s:work /pid == %[2]d/ { @start[tid] = nsecs; }
uretprobe:%[1]s:work /pid == %[2]d && @start[tid]/ { @lat = hist(nsecs - @start[tid]); @calls = count(); delete(@start[tid]); }`, prog, target.Process.Pid)
	btCmd := exec.Command(bt, "-e", script)
	btOut, err := btCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var btErr strings.Builder
	btCmd.Stderr = &btErr
	if err := btCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer btCmd.Process.Kill()
	rd := bufio.NewReader(btOut)
	// bpftrace runs BEGIN once every probe is attached.
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("bpftrace ended before attaching: %v\n%s", err, btErr.String())
		}
		if strings.TrimSpace(line) == "ready" {
			break
		}
	}

	bin := cacheheatBinary(t)
	rec := filepath.Join(t.TempDir(), "bt.rec")
	record := exec.Command(bin, "record", "-q", "-i", "100ms", "--func", "work", "-p", strconv.Itoa(target.Process.Pid), "-o", rec)
	var recErr strings.Builder
	record.Stderr = &recErr
	if err := record.Start(); err != nil {
		t.Fatal(err)
	}
	defer record.Process.Kill()
	waitWindows(t, rec, 1) // the probes attach before the first window
	// Start it, and let it exit when done (end of input).
	if _, err := stdin.Write([]byte{'\n'}); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := target.Wait(); err != nil {
		t.Fatalf("test program: %v", err)
	}
	if err := record.Wait(); err != nil {
		t.Fatalf("record: %v\n%s", err, recErr.String())
	}
	rest := stopBpftrace(t, btCmd, rd, &btErr)

	btHist, btCalls := parseBpftraceHist(t, string(rest))
	js, err := exec.Command(bin, "inspect", "--json", rec).Output()
	if err != nil {
		t.Fatal(err)
	}
	var s funcSummary
	if err := json.Unmarshal(js, &s); err != nil {
		t.Fatal(err)
	}
	f := s.Functions[0]
	if f.Calls != n || btCalls != n {
		t.Fatalf("calls: cacheheat %d, bpftrace %d, want %d\n%s", f.Calls, btCalls, n, rest)
	}
	for _, q := range []float64{0.5, 0.99} {
		ours, theirs := rankBucket(f.Buckets, q), rankBucket(btHist, q)
		t.Logf("p%.0f: cacheheat bucket %d (from %s), bpftrace bucket %d", 100*q, ours, metric.FormatNS(profile.BucketLower(ours)), theirs)
		if d := ours - theirs; d < -1 || d > 1 {
			t.Errorf("p%.0f: cacheheat's bucket %d and bpftrace's %d are more than one apart\ncacheheat %v\nbpftrace %v", 100*q, ours, theirs, f.Buckets, btHist)
		}
	}
}

// stopBpftrace sends bpftrace SIGINT and returns the rest of its output
// (the maps it prints on the way out). Once, beside 'stress-ng --cpu 2',
// bpftrace outlived its SIGINT for the 13 minutes left to the test, so
// SIGINT is sent again every 5 s; after a minute it is killed and the
// test fails saying so, rather than hanging the suite.
func stopBpftrace(t *testing.T, cmd *exec.Cmd, rd io.Reader, stderr *strings.Builder) string {
	t.Helper()
	type result struct {
		out []byte
	}
	done := make(chan result, 1)
	go func() {
		out, _ := io.ReadAll(rd)
		done <- result{out}
	}()
	cmd.Process.Signal(syscall.SIGINT)
	for range 12 {
		select {
		case r := <-done:
			cmd.Wait()
			return string(r.out)
		case <-time.After(5 * time.Second):
			cmd.Process.Signal(syscall.SIGINT)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatalf("bpftrace did not exit within a minute of SIGINT (sent 13 times)\n%s", stderr.String())
	return ""
}

var btLine = regexp.MustCompile(`^\[(\d+)([KMGT]?)(?:,\s*\d+[KMGT]?\))?\]?\s+(\d+)\s*\|`)

// parseBpftraceHist reads @lat's log2 histogram into cacheheat's bucket
// layout (bucket i counts [2^i, 2^(i+1)), bucket 0 also 0 and 1) and
// @calls.
func parseBpftraceHist(t *testing.T, out string) ([]uint64, uint64) {
	t.Helper()
	h := make([]uint64, profile.HistBuckets)
	var calls uint64
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "@calls: "); ok {
			calls, _ = strconv.ParseUint(v, 10, 64)
			continue
		}
		m := btLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		lo, _ := strconv.ParseFloat(m[1], 64)
		if m[2] != "" { // K, M, G, T: powers of 1024
			lo *= math.Pow(1024, float64(strings.Index("KMGT", m[2])+1))
		}
		c, _ := strconv.ParseUint(m[3], 10, 64)
		b := 0
		if lo >= 2 {
			b = int(math.Log2(lo))
		}
		h[min(b, len(h)-1)] += c
	}
	if calls == 0 {
		t.Fatalf("no @calls in bpftrace's output:\n%s", out)
	}
	return h, calls
}

func analyzeJSON(t *testing.T, rec string) attribution.Result {
	t.Helper()
	out, err := exec.Command(cacheheatBinary(t), "analyze", "--json", rec).Output()
	if err != nil {
		t.Fatalf("analyze: %v", err)
	}
	var res attribution.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func findRule(res attribution.Result, id string) (attribution.Finding, bool) {
	for _, f := range res.Findings {
		if f.Rule == id {
			return f, true
		}
	}
	return attribution.Finding{}, false
}

func hasEvidence(f attribution.Finding, counter string) bool {
	for _, e := range f.Evidence {
		if strings.HasPrefix(string(e.Metric), counter+" ") {
			return true
		}
	}
	return false
}
