package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// testStatus stands in for the recorder's status line.
type testStatus struct {
	Windows int    `json:"windows"`
	Target  string `json:"target"`
}

func newTestLive(t *testing.T, opts LiveOptions) (*Live, *httptest.Server) {
	t.Helper()
	if opts.Renderers.Report == nil {
		opts.Renderers = testRenderers()
		opts.Renderers.Findings = evilFindings
	}
	l := NewLive(opts)
	ts := httptest.NewServer(l)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { l.Finish(nil, fmt.Errorf("test ended")) })
	return l, ts
}

// evilFindings finds one finding with a hostile title, its evidence the
// number of windows in the model.
func evilFindings(m *model.Model) attribution.Result {
	return attribution.Result{Findings: []attribution.Finding{{Rule: "r", Severity: "high", Title: evil, Evidence: []attribution.Evidence{
		{Metric: "windows", Value: float64(m.Windows()), Op: ">=", Threshold: 1, Unit: "windows"}}}}}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// stream reads server-sent events from path until the returned stop is
// called or the stream ends.
func stream(t *testing.T, url string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	resp, err := http.Get(url + "/events")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan sseEvent, 1000)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return ch, resp
}

// nextWindow returns the next "window" event's update, skipping others.
func nextWindow(t *testing.T, ch <-chan sseEvent) (update, string) {
	t.Helper()
	for ev := range ch {
		if ev.name != "window" {
			continue
		}
		var u update
		if err := json.Unmarshal([]byte(ev.data), &u); err != nil {
			t.Fatalf("window event %q: %v", ev.data, err)
		}
		return u, ev.data
	}
	t.Fatal("stream ended before the next window event")
	return update{}, ""
}

// waitWindows reads window events until one covers n windows.
func waitWindows(t *testing.T, ch <-chan sseEvent, n int) (update, string) {
	t.Helper()
	for {
		u, raw := nextWindow(t, ch)
		if u.Windows >= n {
			return u, raw
		}
	}
}

func TestLiveStream(t *testing.T) {
	l, ts := newTestLive(t, LiveOptions{AnalyzeEvery: 2})
	ch, resp := stream(t, ts.URL)
	checkSecurityHeaders(t, "events", resp.Header)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("events Content-Type %q", ct)
	}
	if ev := <-ch; ev.name != "hello" {
		t.Fatalf("first event %+v, want hello", ev)
	}
	l.SetHeader(testHeader())
	prev := 0
	for i := 0; i < 5; i++ {
		w := testWindow(i)
		l.Publish(&w, testStatus{Windows: i + 1, Target: evil})
		u, raw := waitWindows(t, ch, i+1)
		if u.Windows <= prev {
			t.Fatalf("update %d covers %d windows, not more than %d", i, u.Windows, prev)
		}
		prev = u.Windows
		if strings.Contains(raw, "<") || strings.Contains(raw, ">") {
			t.Errorf("update carries a raw '<' or '>': %.200s", raw)
		}
		// The charts are the report's, cell for cell: the same builder
		// on the windows so far.
		so := &profile.Recording{Header: testHeader(), Stacks: map[uint64]profile.Stack{}}
		for j := 0; j <= i; j++ {
			w := testWindow(j)
			w.Index = j
			so.Windows = append(so.Windows, w)
		}
		want, _ := json.Marshal(heatmap.BuildCharts(model.FromRecording(so), 0, nil))
		got, _ := json.Marshal(u.Charts)
		if u.Charts == nil || string(got) != string(want) {
			t.Fatalf("update %d charts differ from the report's:\n got %.300s\nwant %.300s", i, got, want)
		}
		cpu := u.Charts.CPU
		if len(cpu.Bins) != i+1 || len(cpu.Rows) != 2 || cpu.Metrics[0].Name != "cpu-clock" || cpu.Metrics[0].Unit != "% busy" {
			t.Fatalf("update %d per-core grid %+v", i, cpu)
		}
		// cpu0's cpu-clock in window i is 900e6+i ns over a 1 s window.
		if got := cpu.Metrics[0].Values[i]; got != 900e6+uint64(i) {
			t.Errorf("cpu0 cpu-clock in window %d = %v, want %v", i, got, 900e6+i)
		}
		if len(u.Findings) != 1 || u.Findings[0].Title != evil {
			t.Errorf("findings %+v", u.Findings)
		}
		if len(u.Evidence) != 1 || len(u.Evidence[0]) != 1 || u.Evidence[0][0] != u.Findings[0].Evidence[0].String() {
			t.Errorf("evidence %q, want each finding's evidence as attribution.Evidence.String writes it", u.Evidence)
		}
		st, _ := json.Marshal(u.Status)
		if !strings.Contains(string(st), fmt.Sprintf(`"windows":%d`, i+1)) {
			t.Errorf("status %s", st)
		}
	}
	// Before the end there is no report.
	r, _ := get(t, ts, "GET", "/report")
	if r.StatusCode != 404 {
		t.Errorf("report while recording = %d, want 404", r.StatusCode)
	}
	f, err := os.Open(writeRecording(t, t.TempDir(), "final.rec", 2))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	go l.Finish(f, nil)
	for ev := range ch {
		if ev.name == "end" {
			if ev.data != `{"dropped":0,"error":"","report":true}` {
				t.Errorf("end event %s", ev.data)
			}
			break
		}
	}
	r, body := get(t, ts, "GET", "/report")
	if r.StatusCode != 200 || body != "<html>REPORT host=h1 windows=2</html>" {
		t.Errorf("final report = %d %q", r.StatusCode, body)
	}
	checkSecurityHeaders(t, "live report", r.Header)
}

// TestLiveStuckClient holds one client that never reads its queue beside
// one that reads everything: Publish never waits, the reader sees every
// window, and the stuck client's losses are counted.
func TestLiveStuckClient(t *testing.T) {
	l, ts := newTestLive(t, LiveOptions{ClientQueue: 2})
	l.SetHeader(testHeader())
	stuck := l.subscribe() // never read
	// A raw connection that asks for the stream and never reads from the
	// socket either.
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
	ch, _ := stream(t, ts.URL)
	const n = 40
	for i := 0; i < n; i++ {
		w := testWindow(i)
		l.Publish(&w, testStatus{Windows: i + 1})
		waitWindows(t, ch, i+1)
	}
	// The builder made at least one update per window (the reader waited
	// for each); the stuck queue holds 2 of them and lost the rest.
	if got := stuck.dropped.Load(); got < n-2 {
		t.Errorf("stuck client dropped %d updates, want at least %d", got, n-2)
	}
	if l.Dropped() < n-2 {
		t.Errorf("Dropped() = %d, want at least %d", l.Dropped(), n-2)
	}
	l.mu.Lock()
	windows := len(l.windows)
	l.mu.Unlock()
	if windows != n {
		t.Errorf("live view holds %d windows, want %d", windows, n)
	}
	l.unsubscribe(stuck)
}

// waitLatest waits for the builder's latest update to cover n windows. It
// reads the update itself, not a stream: a stream client with a
// one-update queue may lose the very update it waits for, and nothing
// would come after it.
func waitLatest(t *testing.T, l *Live, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("an update of %d windows", n), func() bool {
		l.mu.Lock()
		b := l.latest
		l.mu.Unlock()
		var u update
		return b != nil && json.Unmarshal(b, &u) == nil && u.Windows >= n
	})
}

// TestLiveDroppedShown checks that a client that fell behind is told how
// many updates it lost.
func TestLiveDroppedShown(t *testing.T) {
	l, _ := newTestLive(t, LiveOptions{ClientQueue: 1})
	l.SetHeader(testHeader())
	c := l.subscribe()
	for i := 0; i < 5; i++ {
		w := testWindow(i)
		l.Publish(&w, nil)
		waitLatest(t, l, i+1)
	}
	if c.dropped.Load() == 0 {
		t.Fatal("a client with a one-update queue that never read lost nothing")
	}
	// Serve c's queue through a real response to see the "dropped" event.
	rec := httptest.NewRecorder()
	l.unsubscribe(c)
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest("GET", "/events", nil).WithContext(ctx)
	done := make(chan struct{})
	go func() { l.serveEventsFor(rec, req, c); close(done) }()
	w := testWindow(5)
	l.Publish(&w, nil)
	waitLatest(t, l, 6)
	l.Finish(nil, fmt.Errorf("stopped"))
	<-done
	cancel()
	body := rec.Body.String()
	if !strings.Contains(body, "event: dropped\ndata: ") {
		t.Errorf("stream of a client that lost updates has no dropped event:\n%.300s", body)
	}
	if !strings.Contains(body, "event: end\ndata: {") || !strings.Contains(body, `"error":"stopped"`) || !strings.Contains(body, `"report":false`) {
		t.Errorf("stream has no end event with the error:\n%.300s", body)
	}
}

func TestLiveHeaders(t *testing.T) {
	_, ts := newTestLive(t, LiveOptions{})
	for path, code := range map[string]int{"/": 200, "/report": 404, "/nope": 404, "/../x": 404} {
		resp, body := get(t, ts, "GET", path)
		if resp.StatusCode != code {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, code)
		}
		checkSecurityHeaders(t, path, resp.Header)
		if path == "/" && (!strings.Contains(body, `new EventSource('/events')`) || !strings.Contains(body, "cacheheatLive")) {
			t.Errorf("live page lacks its script")
		}
	}
	resp, _ := get(t, ts, "POST", "/events")
	if resp.StatusCode != 405 {
		t.Errorf("POST /events = %d, want 405", resp.StatusCode)
	}
	checkSecurityHeaders(t, "POST", resp.Header)
	if !strings.Contains(ContentSecurityPolicy, "connect-src 'self'") {
		t.Errorf("CSP does not let the live page open its stream")
	}
	_ = io.Discard
}

// TestLiveBanner: a simulated recording's live updates carry the report's
// red banner text; a measured one's carry none.
func TestLiveBanner(t *testing.T) {
	for _, simulated := range []bool{false, true} {
		l, ts := newTestLive(t, LiveOptions{})
		ch, _ := stream(t, ts.URL)
		h := testHeader()
		if simulated {
			h.PMU = &profile.PMU{Simulated: "intel-icx"}
		}
		l.SetHeader(h)
		w := testWindow(0)
		l.Publish(&w, testStatus{Windows: 1})
		u, _ := waitWindows(t, ch, 1)
		if got := u.Banner != ""; got != simulated || (simulated && !strings.Contains(u.Banner, "intel-icx")) {
			t.Errorf("simulated %v: banner %q", simulated, u.Banner)
		}
	}
}
