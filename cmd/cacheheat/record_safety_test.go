package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// TestRecordSIGHUP: an SSH session closing (SIGHUP) finishes the recording
// as Ctrl-C does: exit 0, trailer, end reason signal, file in place.
func TestRecordSIGHUP(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	out := filepath.Join(t.TempDir(), "hup.rec")
	cmd := exec.Command(bin, "record", "-a", "-q", "-e", "cpu-clock", "-i", "100ms", "-o", out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	waitWindows(t, out, 2)
	must(t, cmd.Process.Signal(syscall.SIGHUP))
	err := cmd.Wait()
	rec, rerr := profile.ReadFile(out)
	if err != nil || rerr != nil || rec.Trailer == nil || rec.Trailer.EndReason != profile.EndSignal {
		t.Fatalf("SIGHUP: exit %v, read %v, trailer %+v; want exit 0 and a finished recording (stderr %s)", err, rerr, rec, stderr.String())
	}
}

// TestRecordEarlySignal: the stop signals are subscribed before any of the
// heavy package initializers run (the BPF library, charts, templates, the
// collector): no Go program can catch a signal before its own first
// initializer, which GODEBUG=inittrace=1 shows about 5 ms after the
// runtime's start here, and internal/stopsig's init runs right after the
// standard library's. Before, the subscription came after all of them and
// after flag parsing and the live view's start. Then a SIGINT during
// start-up (150 and 300 ms after the runtime's handlers, while the recorder
// loads its programs) finishes the recording: exit 0, a readable file.
func TestRecordEarlySignal(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	cmd := exec.Command(bin, "record", "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	trace, _ := cmd.CombinedOutput()
	var order []string
	for _, line := range strings.Split(string(trace), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "init" {
			order = append(order, f[1])
		}
	}
	at := slices.Index(order, "github.com/cacheheat/cacheheat/internal/stopsig")
	if at < 0 {
		t.Fatalf("internal/stopsig is not initialized:\n%s", trace)
	}
	// The module's own packages (templates, tables) and the BPF library
	// come after it; a leaf package of constants may come before.
	for _, p := range order[:at] {
		own := strings.HasPrefix(p, "github.com/cacheheat/cacheheat/") && !strings.Contains(p, "/internal/")
		if own || strings.HasPrefix(p, "github.com/cilium/") {
			t.Errorf("%s is initialized before the stop signals are caught", p)
		}
	}
	if len(order[at:]) < 10 {
		t.Errorf("only %d packages initialized after internal/stopsig: %v", len(order[at:]), order[at:])
	}

	for _, delay := range []time.Duration{150 * time.Millisecond, 300 * time.Millisecond} {
		out := filepath.Join(t.TempDir(), "early.rec")
		cmd := exec.Command(bin, "record", "-a", "-q", "-e", "cpu-clock", "-i", "100ms", "-d", "30s", "-o", out)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		must(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill() })
		for !catches(cmd.Process.Pid, syscall.SIGINT) {
			time.Sleep(50 * time.Microsecond)
		}
		time.Sleep(delay)
		must(t, cmd.Process.Signal(syscall.SIGINT))
		err := cmd.Wait()
		if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
			t.Errorf("SIGINT %v after start-up killed the recorder (%v) instead of finishing it", delay, ws.Signal())
			continue
		}
		if rec, rerr := profile.ReadFile(out); err != nil || rerr != nil || rec.Trailer == nil || rec.Trailer.EndReason != profile.EndSignal {
			t.Errorf("SIGINT %v after start-up: exit %v, read %v; want exit 0 and a finished recording (stderr %s)", delay, err, rerr, stderr.String())
		}
	}
}

// catches says whether pid has a handler for sig (SigCgt in its status).
func catches(pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// TestRecordCommandNeverOutlives is the issue's own case: a command that
// ignores SIGTERM and has a child is gone, child included, once record
// returns; the trailer says SIGKILL ended it.
func TestRecordCommandNeverOutlives(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	dir := t.TempDir()
	out, pidFile := filepath.Join(dir, "t.rec"), filepath.Join(dir, "pid")
	cmd := exec.Command(bin, "record", "-q", "-e", "cpu-clock", "-d", "2s", "-o", out, "--",
		"bash", "-c", `trap "" TERM; sleep 30 & echo $! > `+pidFile+`; wait; sleep 30`)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, b)
	}
	b, err := os.ReadFile(pidFile)
	must(t, err)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !bytes.Contains(st, []byte(") Z")) {
		t.Errorf("the command's 'sleep 30' (pid %d) outlived the recorder: %s", pid, st)
	}
	rec, err := profile.ReadFile(out)
	must(t, err)
	if tr := rec.Trailer; tr == nil || tr.ExitStatus == nil || *tr.ExitStatus != 137 || tr.ExitSignal != "SIGKILL" {
		t.Errorf("trailer %+v, want exit 137 by SIGKILL", tr)
	}
	// inspect shows it.
	if _, o, _ := runCmd("inspect", out); !strings.Contains(o, "ended by SIGKILL") {
		t.Errorf("inspect does not show the signal:\n%s", o)
	}
}

// TestRecordSmallItems: duplicate -e events are measured once; the
// header's tool carries the version; an existing recording is kept as
// FILE.old and a planted FILE.partial symlink is not followed.
func TestRecordSmallItems(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.rec")
	victim := filepath.Join(dir, "victim")
	must(t, os.WriteFile(out, []byte("previous"), 0o644))
	must(t, os.WriteFile(victim, []byte("precious"), 0o644))
	must(t, os.Symlink(victim, out+profile.PartialSuffix))
	cmd := exec.Command(bin, "record", "-a", "-q", "-e", "page-faults,cpu-clock,page-faults", "-i", "100ms", "-d", "300ms", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, b)
	}
	rec, err := profile.ReadFile(out)
	must(t, err)
	var names []string
	for _, e := range rec.Header.Events {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "page-faults,cpu-clock" {
		t.Errorf("events %v, want page-faults,cpu-clock (the duplicate merged)", names)
	}
	if rec.Header.Tool != "cacheheat "+Version {
		t.Errorf("tool %q, want %q", rec.Header.Tool, "cacheheat "+Version)
	}
	if b, _ := os.ReadFile(out + ".old"); string(b) != "previous" {
		t.Errorf("r.rec.old = %q, want the previous file", b)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("victim = %q: the planted r.rec.partial symlink was followed", b)
	}
}

// TestRecordNothingMeasurable: -e with only events this host cannot count
// is exit 3 with the reason, and no recording (it used to write one with no
// counters).
func TestRecordNothingMeasurable(t *testing.T) {
	needRoot(t)
	out := filepath.Join(t.TempDir(), "r.rec")
	cmd := exec.Command(cacheheatBinary(t), "record", "-a", "-q", "-e", "cycles,instructions", "-d", "1s", "-o", out)
	b, err := cmd.CombinedOutput()
	if exitStatus(err) == 0 {
		t.Skip("this host counts cycles (it has a PMU): the case cannot be built here")
	}
	if code := exitStatus(err); code != exitHost || !strings.Contains(string(b), "none of the requested events") {
		t.Errorf("record -e cycles,instructions: exit %d %s; want 3 and the reasons", code, b)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a recording was written")
	}
}

// TestRecordSampleRateLimit: -F above the kernel's limit is lowered to
// it, as perf record does, with a note naming the limit; the recording's
// header has the rate used.
func TestRecordSampleRateLimit(t *testing.T) {
	needRoot(t)
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_max_sample_rate")
	if err != nil {
		t.Skipf("no perf_event_max_sample_rate: %v", err)
	}
	limit := strings.TrimSpace(string(b))
	out := filepath.Join(t.TempDir(), "r.rec")
	b, err = exec.Command(cacheheatBinary(t), "record", "-F", "100000000", "-o", out, "--", "true").CombinedOutput()
	if err != nil || !strings.Contains(string(b), limit) || !strings.Contains(string(b), "perf_event_max_sample_rate") {
		t.Errorf("-F 100000000: %v %s; want exit 0 and a note naming the limit %s", err, b, limit)
	}
	rec, err := profile.ReadFile(out)
	must(t, err)
	if strconv.Itoa(rec.Header.Settings.SampleHz) != limit {
		t.Errorf("header sample rate %d, want the limit %s", rec.Header.Settings.SampleHz, limit)
	}
}

// TestServeHostHeader: serve refuses a request whose Host is not its own
// (DNS rebinding) with 421 and serves one that is.
func TestServeHostHeader(t *testing.T) {
	bin := cacheheatBinary(t)
	cmd := exec.Command(bin, "serve", "--dir", t.TempDir(), "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	must(t, err)
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("no address in %q", line)
	}
	url := strings.TrimSpace(line[i:])
	url = url[:strings.Index(url[len("http://"):], "/")+len("http://")]
	checkHostHeader(t, url)
}

// checkHostHeader asks url with a foreign and with its own Host header.
func checkHostHeader(t *testing.T, url string) {
	t.Helper()
	for host, want := range map[string]int{"attacker.example": http.StatusMisdirectedRequest, strings.TrimPrefix(url, "http://"): http.StatusOK, "localhost": http.StatusOK} {
		req, err := http.NewRequest("GET", url+"/", nil)
		must(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("Host %s: %v", host, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: status %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestRecordLiveHostHeader: record --live refuses a foreign Host too.
func TestRecordLiveHostHeader(t *testing.T) {
	needRoot(t)
	liveRecordingFor(t, "200ms", "2s", func(addr string) {
		c := dialEvents(t, addr, false) // waits for the server to come up
		c.Close()
		checkHostHeader(t, "http://"+addr)
	})
}

// TestServeTimeouts: serve's HTTP server has read, write and idle
// timeouts, so slow or idle clients cannot hold connections for ever.
func TestServeTimeouts(t *testing.T) {
	srv := newServeServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Errorf("timeouts: read header %v, read %v, write %v, idle %v; want all set", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
}

// TestRecordTreeEnds: everything a command target starts ends with the
// recording, a child that called setsid (out of the process group)
// included: when the recording ends, after each of repeated runs, and when
// the recorder itself is killed with SIGKILL, which leaves neither the
// processes nor the metrics file behind.
func TestRecordTreeEnds(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	dir := t.TempDir()
	// Each case's sleeps carry a duration no other process has: what the
	// test looks for is only its own.
	token := func(i int) string { return fmt.Sprintf("%d.%03d", 4000+os.Getpid()%1000, i) }
	escape := func(tok string) string { return "setsid sleep " + tok + " & sleep " + tok + "; true" }

	for i, args := range [][]string{
		{"-d", "1s"},
		{"-r", "2"},
	} {
		tok := token(i)
		cmdline := escape(tok)
		if args[0] == "-r" {
			cmdline = "setsid sleep " + tok + " & true" // each run leaves one behind
		}
		rec := filepath.Join(dir, fmt.Sprintf("r%d.rec", i))
		out, err := exec.Command(bin, append(append([]string{"record", "-q", "-o", rec}, args...), "--", "sh", "-c", cmdline)...).CombinedOutput()
		if err != nil {
			t.Fatalf("record %v: %v\n%s", args, err, out)
		}
		if left := processesWith(tok); len(left) > 0 {
			t.Errorf("record %v: processes outlived the recording: %v", args, left)
		}
	}

	tok := token(9)
	rec := filepath.Join(dir, "killed.rec")
	cmd := exec.Command(bin, "record", "-q", "-o", rec, "--", "sh", "-c", escape(tok))
	must(t, cmd.Start())
	for i := 0; i < 500 && len(processesWith(tok)) < 2; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(processesWith(tok)); n < 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the command's two sleeps did not start (%d seen)", n)
	}
	metrics, _ := filepath.Glob(filepath.Join(dir, ".cacheheat-metrics-*"))
	if len(metrics) != 1 {
		t.Errorf("metrics files beside the recording: %v, want one", metrics)
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	var left []string
	for i := 0; i < 500; i++ {
		left, metrics = processesWith(tok), nil
		metrics, _ = filepath.Glob(filepath.Join(dir, ".cacheheat-metrics-*"))
		if len(left) == 0 && len(metrics) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 || len(metrics) > 0 {
		t.Errorf("after kill -9 of the recorder: processes %v and metrics files %v left", left, metrics)
	}
}

// processesWith lists the live processes (not zombies) whose command line
// holds tok, as "pid cmdline".
func processesWith(tok string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(b, []byte(tok)) || bytes.Contains(b, []byte("cacheheat")) {
			continue
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || bytes.Contains(st, []byte(") Z")) {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
	return out
}

// TestRecordMetricsBomb: a command that truncates its metrics file to
// 2 TB (a hole: no disk) cannot hold the recording: -d is kept (the
// recording ends for its duration, with its windows), the skipped bytes
// are said, and the file is removed. Before the per-poll bound the
// recorder read the hole window after window and ignored -d.
func TestRecordMetricsBomb(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "r.rec")
	// A guard against a hang, not a timing: the recording takes about 3 s.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, cacheheatBinary(t), "record", "-d", "2s", "-o", rec, "--",
		"bash", "-c", `truncate -s 2T "$CACHEHEAT_METRICS" || exit 9; sleep 5`).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("record did not end within 2 minutes of a 2 s recording:\n%s", out)
	}
	r, rerr := profile.ReadFile(rec)
	if err != nil || rerr != nil {
		t.Fatalf("record: %v; reading: %v\n%s", err, rerr, out)
	}
	if st := r.Trailer.ExitStatus; st != nil && *st == 9 {
		t.Skip("this file system cannot hold a 2 TB sparse file")
	}
	if r.Trailer.EndReason != profile.EndDuration || len(r.Windows) < 2 || !strings.Contains(string(out), "bytes skipped") {
		t.Errorf("end %q, %d windows; want the duration's end, 2 windows or more and the skipped bytes said:\n%s", r.Trailer.EndReason, len(r.Windows), out)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".cacheheat-metrics-*")); len(left) > 0 {
		t.Errorf("metrics file left: %v", left)
	}
}

// TestRecordDiskFullAtStart: a recording onto a disk already full is exit
// 5 with the reason, and leaves nothing behind (it used to exit 2 and
// leave an empty .partial). The disk is a 64 KiB tmpfs mounted for the
// test and filled.
func TestRecordDiskFullAtStart(t *testing.T) {
	needRoot(t)
	small := filepath.Join(t.TempDir(), "small")
	must(t, os.Mkdir(small, 0o755))
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(small, 0) })
	filler, err := os.Create(filepath.Join(small, "filler"))
	must(t, err)
	for {
		if _, err := filler.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	filler.Close()
	out, err := exec.Command(cacheheatBinary(t), "record", "-q", "-o", filepath.Join(small, "r.rec"), "--", "true").CombinedOutput()
	if code := exitStatus(err); code != exitOutput || !strings.Contains(string(out), "no space") {
		t.Errorf("record onto a full disk: exit %d %s; want %d and the reason", code, out, exitOutput)
	}
	if entries, _ := os.ReadDir(small); len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("left behind beside the filler: %v", names)
	}
}
