package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/heatmap/synth"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/web"
)

// TestServeRenderers serves synthetic recordings through the real report
// packages: the report page is byte for byte what 'cacheheat report'
// writes, the diff page is the diff report, and the index counts the
// findings attribution finds.
func TestServeRenderers(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.rec"), filepath.Join(dir, "b.rec")
	o := synth.Default()
	if err := synth.Write(a, o); err != nil {
		t.Fatal(err)
	}
	o.Seed, o.Windows = 2, 8
	if err := synth.Write(b, o); err != nil {
		t.Fatal(err)
	}
	s, err := web.NewServer(dir, webRenderers())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)

	body := httpGet(t, ts.URL+"/report?f=a.rec", 200)
	out := filepath.Join(dir, "a.html")
	if code, stdout, stderr := runCmd("report", a, "-o", out); code != 0 {
		t.Fatalf("report: exit %d\n%s%s", code, stdout, stderr)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(body), want) {
		t.Errorf("served report (%d bytes) differs from 'cacheheat report' (%d bytes)", len(body), len(want))
	}
	diff := httpGet(t, ts.URL+"/diff?base=a.rec&new=b.rec", 200)
	if !strings.Contains(diff, "cacheheat diff") || strings.Contains(diff, "<script src") {
		t.Errorf("diff page is not the self-contained diff report")
	}
	rec, err := profile.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	n := len(attribution.Analyze(model.FromRecording(rec)).Findings)
	for _, r := range s.Rows(context.Background()) {
		if r.Name == "b.rec" && (r.Findings != n || r.Windows != 8) {
			t.Errorf("index row %+v, want %d findings and 8 windows", r, n)
		}
	}
}

func httpGet(t *testing.T, url string, code int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != code {
		t.Fatalf("GET %s = %d, want %d: %.300s", url, resp.StatusCode, code, b)
	}
	return string(b)
}

func TestServeUsage(t *testing.T) {
	if code, _, errs := runCmd("serve", "--dir", filepath.Join(t.TempDir(), "missing")); code != exitUsage || !strings.Contains(errs, "not a directory") {
		t.Errorf("serve on a missing dir: exit %d %q, want 2", code, errs)
	}
	if code, _, _ := runCmd("serve", "extra"); code != exitUsage {
		t.Errorf("serve with an argument: exit %d, want 2", code)
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: recording loads BPF programs")
	}
}

// liveRecording runs 'record --live' on the whole host for 2 s in 200 ms
// windows; during it, watch is called with the live view's address.
func liveRecording(t *testing.T, watch func(addr string)) *profile.Recording {
	t.Helper()
	return liveRecordingFor(t, "200ms", "2s", watch)
}

// liveRecordingFor is liveRecording with a window length and duration.
func liveRecordingFor(t *testing.T, interval, duration string, watch func(addr string)) *profile.Recording {
	t.Helper()
	out := filepath.Join(t.TempDir(), "live.rec")
	addr := freeAddr(t)
	done := make(chan struct{})
	var code int
	var stdout, stderr string
	go func() {
		defer close(done)
		code, stdout, stderr = runCmd("record", "--live", addr, "-a", "-e", "cpu-clock,page-faults,context-switches", "-i", interval, "-d", duration, "-q", "--linger", "2s", "-o", out)
	}()
	if watch != nil {
		watch(addr)
	}
	<-done
	if code != 0 {
		t.Fatalf("record --live: exit %d\n%s%s", code, stdout, stderr)
	}
	rec, err := profile.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// dialEvents opens the live stream, retrying while the recorder starts.
// With page set it asks as a browser's EventSource does.
func dialEvents(t *testing.T, addr string, page bool) net.Conn {
	t.Helper()
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			accept := ""
			if page {
				accept = "Accept: text/event-stream\r\n"
			}
			fmt.Fprintf(c, "GET /events HTTP/1.1\r\nHost: %s\r\n%s\r\n", addr, accept)
			return c
		}
		if i > 300 {
			t.Fatalf("live view at %s never came up: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRecordLive reads the live stream of a real recording: at least 3
// window events, each covering more windows than the last, with per-core
// rows for the host's CPUs, then the end event with the final report.
func TestRecordLive(t *testing.T) {
	needRoot(t)
	var windows []int
	var cpuRows int
	var end string
	var report string
	rec := liveRecording(t, func(addr string) {
		c := dialEvents(t, addr, true)
		defer c.Close()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("reading the stream's response: %v", err)
			return
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("stream CSP %q", csp)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			switch event {
			case "window":
				var u struct {
					Windows int `json:"windows"`
					Charts  struct {
						CPU heatmap.Grid `json:"cpu"`
					} `json:"charts"`
				}
				if err := json.Unmarshal([]byte(data), &u); err != nil {
					t.Errorf("window event: %v", err)
				}
				if u.Windows > 0 {
					windows = append(windows, u.Windows)
					cpuRows = len(u.Charts.CPU.Rows)
				}
			case "end":
				end = data
				report = httpGet(t, "http://"+addr+"/report", 200)
				return
			}
		}
	})
	if len(windows) < 3 {
		t.Fatalf("read %d window events (%v), want at least 3", len(windows), windows)
	}
	for i := 1; i < len(windows); i++ {
		if windows[i] <= windows[i-1] {
			t.Errorf("window events %v do not grow", windows)
		}
	}
	if last := windows[len(windows)-1]; last != len(rec.Windows) {
		t.Errorf("last live update covers %d windows, the file has %d", last, len(rec.Windows))
	}
	if cpuRows != len(rec.Header.Host.Topology.CPUs) {
		t.Errorf("per-core heatmap has %d rows, host has %d CPUs", cpuRows, len(rec.Header.Host.Topology.CPUs))
	}
	if !strings.Contains(end, `"report":true`) {
		t.Errorf("end event %s", end)
	}
	if !strings.Contains(report, "cacheheat-data") {
		t.Errorf("final report is not the HTML report (%d bytes)", len(report))
	}
}

// TestRecordLiveStuckClient records with a viewer that opens the stream
// and never reads it, beside one that reads everything. The recording
// must be whole: its windows are contiguous and cover the duration, the
// trailer counts them all, and the reading viewer's last update covers
// every window the file has (each went through the sinks while the stuck
// viewer sat there). The window count itself is not compared with a
// second run: on a loaded host it varies between runs without any viewer
// (a 2 s recording of 200 ms windows has given 3 to 11 windows at load 11).
func TestRecordLiveStuckClient(t *testing.T) {
	needRoot(t)
	var stuck net.Conn
	last := 0
	// A recorder that waited for the stuck viewer would hold a window open
	// until the viewer's write timeout (10 s). Comparing the window count
	// with an unwatched recording does not tell that apart on a loaded
	// host: a starved recorder makes fewer, longer windows by itself (seen
	// under stress-ng: 6 and 4). The longest window does: starved windows
	// here lasted up to about 4 s.
	const interval, duration = "500ms", "2700ms"
	rec := liveRecordingFor(t, interval, duration, func(addr string) {
		stuck = dialEvents(t, addr, false) // never read
		c := dialEvents(t, addr, false)
		defer c.Close()
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "event: end") {
				return
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var u struct {
					Windows int `json:"windows"`
				}
				if json.Unmarshal([]byte(data), &u) == nil && u.Windows > last {
					last = u.Windows
				}
			}
		}
	})
	if stuck != nil {
		stuck.Close()
	}
	n := len(rec.Windows)
	if rec.Trailer == nil || rec.Trailer.EndReason != profile.EndDuration || rec.Trailer.Windows != n {
		t.Fatalf("recording with a stuck viewer: trailer %+v, %d windows", rec.Trailer, n)
	}
	for i := 1; i < n; i++ {
		if rec.Windows[i].StartNS != rec.Windows[i-1].EndNS {
			t.Errorf("gap between windows %d and %d", i-1, i)
		}
	}
	if end := rec.Windows[n-1].EndNS; end < (2700 * time.Millisecond).Nanoseconds() {
		t.Errorf("windows cover %v of a 2.7s recording", time.Duration(end))
	}
	if st := profile.Stretched(rec); st.LongestNS >= (10 * time.Second).Nanoseconds() {
		t.Errorf("a window lasted %v: the recorder waited for the stuck viewer", time.Duration(st.LongestNS))
	}
	if last != n {
		t.Errorf("the reading viewer's last update covers %d windows, the file has %d", last, n)
	}
	t.Logf("%d windows with a stuck viewer", n)
}
