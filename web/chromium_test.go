package web

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/compare"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/heatmap/synth"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

const chromiumPath = "/usr/bin/chromium"

// TestLivePageInChromium loads the live page in headless Chromium,
// publishes windows one by one and reads, through the page's cacheheatLive
// hook, the cells of the per-core chart: they grow with the windows (2
// CPUs: 2 cells per window). Hostile names show as text, and at the end
// the page links to the finished report and stays.
func TestLivePageInChromium(t *testing.T) {
	needChromium(t)
	l, ts := newTestLive(t, LiveOptions{})
	l.SetHeader(testHeader())

	page := startChromium(t, ts.URL+"/")
	eval := func(expr string) json.RawMessage { return page.eval(t, expr) }
	waitFor(t, "the live page's hook", func() bool {
		return string(eval(`typeof cacheheatLive === "object"`)) == "true"
	})
	prev := 0
	for i := 0; i < 4; i++ {
		w := testWindow(i)
		l.Publish(&w, testStatus{Windows: i + 1, Target: evil})
		want := 2 * (i + 1)
		var cells int
		waitFor(t, fmt.Sprintf("%d per-core cells", want), func() bool {
			json.Unmarshal(eval(`(cacheheatLive.inspect().filter(function (c) { return c.id === "cpu"; })[0] || {cells: 0}).cells`), &cells)
			return cells >= want
		})
		if cells <= prev {
			t.Fatalf("after window %d the chart has %d cells, not more than %d", i, cells, prev)
		}
		prev = cells
	}
	// Hostile strings are shown as text, never run.
	status := string(eval(`document.getElementById("live-status").textContent`))
	if !strings.Contains(status, `\u003c/script\u003e`) && !strings.Contains(status, `</script>`) {
		t.Errorf("status line %s does not show the target text", status)
	}
	if got := string(eval(`document.querySelectorAll("#live img, #live script").length`)); got != "0" {
		t.Errorf("hostile markup became elements: %s", got)
	}
	if got := string(eval(`document.getElementById("live-findings").textContent`)); !strings.Contains(got, "onerror=alert(2)") {
		t.Errorf("findings %s do not show the finding's title as text", got)
	}
	// The evidence reads as the CLI writes it (attribution.Evidence.String).
	if got := string(eval(`document.getElementById("live-findings").textContent`)); !strings.Contains(got, "windows (threshold >= 1 windows)") {
		t.Errorf("findings %s do not show the evidence as the CLI writes it", got)
	}
	if got := string(eval(`JSON.stringify(cacheheatLive.errors())`)); got != `"[]"` {
		t.Errorf("console errors on the live page: %s", got)
	}
	// At the end the page says so and links to the report; it stays.
	final, err := os.Open(writeRecording(t, t.TempDir(), "final.rec", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer final.Close()
	l.Finish(final, nil)
	waitFor(t, "the page to link to the final report", func() bool {
		return string(eval(`!document.getElementById("live-report").hidden && document.getElementById("live-report-link").getAttribute("href")`)) == `"/report"`
	})
	if got := string(eval(`location.pathname`)); got != `"/"` {
		t.Errorf("the live page navigated away to %s", got)
	}
	if r, body := get(t, ts, "GET", "/report"); r.StatusCode != 200 || body != "<html>REPORT host=h1 windows=1</html>" {
		t.Errorf("final report = %d %q", r.StatusCode, body)
	}
}

// chartInfo is what cacheheatCommon.inspect says of one chart.
type chartInfo struct {
	ID       string     `json:"id"`
	Unit     string     `json:"unit"`
	Bar      []string   `json:"bar"`
	Overlaps []string   `json:"overlaps"`
	Labels   int        `json:"labels"`
	Rows     []string   `json:"rows"`
	Cells    int        `json:"cells"`
	Values   []*float64 `json:"values"`
}

// TestPagesAgreeInChromium renders one recording three ways, the static
// report, the live page fed its windows one by one, and the diff page of
// it against a second recording, and opens each in headless Chromium. The
// live and static per-core and per-node maps must have the same rows in
// the same order and the same value in every cell; every colour bar must
// say its unit; no two texts of a chart (axis labels, colour bar, legend)
// may overlap, by the boxes ECharts drew them in; no page may log an
// error. It runs on the 2-CPU hostile recording and on a synthetic 128-CPU
// host (two nodes, eight L3 domains), where row labels must thin out.
func TestPagesAgreeInChromium(t *testing.T) {
	needChromium(t)
	hostile := func(n int) *profile.Recording {
		rec := &profile.Recording{Header: testHeader(), Stacks: map[uint64]profile.Stack{}}
		for i := 0; i < n; i++ {
			w := testWindow(i)
			w.Index = i
			for _, st := range w.NewStacks {
				rec.Stacks[st.ID] = st
			}
			rec.Windows = append(rec.Windows, w)
		}
		return rec
	}
	wide := func(seed uint64) *profile.Recording {
		o := synth.Big()
		o.Windows, o.Seed = 12, seed
		return synth.Recording(o)
	}
	for _, tc := range []struct {
		name      string
		rec, base *profile.Recording
	}{
		{"2 CPUs hostile", hostile(6), hostile(5)},
		{"128 CPUs", wide(1), wide(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			static, sp := inspectPage(t, "file://"+writePage(t, dir, "report.html", func(w io.Writer) error {
				return heatmap.Render(w, tc.rec, heatmap.Options{})
			}))
			checkCheckers(t, sp)
			checkFlame(t, sp, tc.rec)
			diff, _ := inspectPage(t, "file://"+writePage(t, dir, "diff.html", func(w io.Writer) error {
				res := compare.Compare(tc.base, tc.rec, compare.DefaultOptions())
				return heatmap.WriteDiff(w, tc.base, tc.rec, &res)
			}))
			live := inspectLive(t, tc.rec)

			for _, page := range []struct {
				name   string
				charts []chartInfo
			}{{"report", static}, {"live", live}, {"diff", diff}} {
				if len(page.charts) < 2 {
					t.Errorf("%s: %d charts", page.name, len(page.charts))
				}
				for _, c := range page.charts {
					checkChart(t, page.name, c)
				}
			}
			byID := func(cs []chartInfo, id string) *chartInfo {
				for i := range cs {
					if cs[i].ID == id {
						return &cs[i]
					}
				}
				return nil
			}
			for _, id := range []string{"cpu", "node"} {
				s, l := byID(static, id), byID(live, id)
				if s == nil || l == nil {
					t.Fatalf("%s chart: report has it %v, live page %v", id, s != nil, l != nil)
				}
				if strings.Join(s.Rows, "|") != strings.Join(l.Rows, "|") {
					t.Errorf("%s rows differ:\nreport %q\nlive   %q", id, s.Rows, l.Rows)
				}
				if len(s.Values) == 0 || len(s.Values) != len(l.Values) {
					t.Fatalf("%s: report has %d cells, live page %d", id, len(s.Values), len(l.Values))
				}
				for i := range s.Values {
					a, b := s.Values[i], l.Values[i]
					if (a == nil) != (b == nil) || (a != nil && *a != *b) {
						t.Fatalf("%s cell %d (row %d): report %v, live page %v", id, i, i/len(tc.rec.Windows), deref(a), deref(b))
					}
				}
				t.Logf("%s: %d rows, %d cells agree; unit %q, colour bar %q", id, len(s.Rows), len(s.Values), s.Unit, s.Bar)
			}
		})
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkChart asserts a chart's colour bar, if it has one, says the unit,
// and that none of its texts overlap.
func checkChart(t *testing.T, page string, c chartInfo) {
	t.Helper()
	if len(c.Overlaps) > 0 {
		t.Errorf("%s chart %s: overlapping texts: %q", page, c.ID, c.Overlaps)
	}
	if c.Labels == 0 {
		t.Errorf("%s chart %s: no text found (axis labels, colour bar): cannot check overlaps", page, c.ID)
	}
	if len(c.Bar) == 0 {
		return // no colour bar: a line or bar chart with a labelled axis
	}
	if c.Unit == "" {
		t.Errorf("%s chart %s: colour bar %q without a unit", page, c.ID, c.Bar)
		return
	}
	unit, _, _ := strings.Cut(c.Unit, "\n")
	found := false
	for _, s := range c.Bar {
		if strings.Contains(s, unit) {
			found = true
		}
	}
	if !found {
		t.Errorf("%s chart %s: colour bar texts %q do not say the unit %q", page, c.ID, c.Bar, c.Unit)
	}
}

func writePage(t *testing.T, dir, name string, render func(io.Writer) error) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := render(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkCheckers shows that the page's checks can fail: with every row
// label forced on (128 rows in a 900 px chart would need 1792 px) the
// overlap check must report overlaps, and the colour scale is clipped at
// the 99th percentile when a few cells dwarf the rest, and only then.
func checkCheckers(t *testing.T, p *cdpPage) {
	t.Helper()
	scales := string(p.eval(t, `(function () {
		var flat = [], spiky = [];
		for (var i = 0; i < 200; i++) { flat.push(10 + i % 7); spiky.push(10 + i % 7); }
		spiky[3] = 5000;
		return JSON.stringify([cacheheatCommon.colourScale(flat, 0).clipped, cacheheatCommon.colourScale(spiky, 0).clipped, cacheheatCommon.colourScale(spiky, 100).clipped]);
	})()`))
	if scales != `"[false,true,false]"` {
		t.Errorf("colour scale clipped (flat, one outlier, one outlier with a natural top) = %s, want [false,true,false]", scales)
	}
	rows := string(p.eval(t, `cacheheatReport.charts[0].chart.getOption().yAxis[0].data.length`))
	if rows != "128" {
		return // the overlap check needs a tall map to fail on
	}
	got := decodeCharts(t, p.eval(t, `(function () {
		var c = cacheheatReport.charts[0].chart;
		c.setOption({ yAxis: [{ axisLabel: { interval: 0 } }] });
		return JSON.stringify(cacheheatCommon.inspect([cacheheatReport.charts[0]]));
	})()`))
	if len(got) != 1 || len(got[0].Overlaps) == 0 {
		t.Errorf("with all 128 row labels on, the overlap check found no overlap")
	}
}

// checkFlame searches the report's first flame graph in the page: the
// matching frames are highlighted and the share it states is the one the
// flame tree gives (outermost matches only, so recursion counts once); a
// search that matches nothing says 0.0%; a click zooms, Reset undoes it.
func checkFlame(t *testing.T, p *cdpPage, rec *profile.Recording) {
	t.Helper()
	views := heatmap.SampleViews(model.FromRecording(rec))
	if len(views) == 0 {
		t.Fatal("the recording has no samples to draw a flame graph of")
	}
	root := views[0].Flame
	// A frame that holds part of the samples where there is one: the
	// second child of the first node that branches; else the deepest.
	n := root
	for len(n.Children) == 1 {
		n = n.Children[0]
	}
	name := n.Name
	if len(n.Children) > 1 {
		name = n.Children[1].Name
	}
	var matched func(n heatmap.FlameNode) uint64
	matched = func(n heatmap.FlameNode) uint64 {
		if strings.Contains(strings.ToLower(n.Name), strings.ToLower(name)) {
			return n.Value
		}
		var s uint64
		for _, c := range n.Children {
			s += matched(c)
		}
		return s
	}
	want := fmt.Sprintf("matched: %.1f%% of samples", 100*float64(matched(root))/float64(root.Value))
	// The name is searched for as it is: every regexp metacharacter
	// escaped, as regexp.QuoteMeta does.
	var lit strings.Builder
	for _, r := range name {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			lit.WriteByte('\\')
		}
		lit.WriteRune(r)
	}
	q, _ := json.Marshal(lit.String())
	got := string(p.eval(t, `cacheheatReport.flames[0].search(`+string(q)+`)`))
	hits := string(p.eval(t, `document.querySelectorAll("#flame-0 .fr.hit").length`))
	if !strings.Contains(got, want) || hits == "0" {
		t.Errorf("flame search for %q: note %s with %s highlighted frames, want %q and some", name, got, hits, want)
	}
	t.Logf("flame search for %q: %s, %s frames highlighted", name, got, hits)
	if got := string(p.eval(t, `cacheheatReport.flames[0].search("no such function, surely")`)); !strings.Contains(got, "matched: 0.0%") {
		t.Errorf("flame search for nothing: %s", got)
	}
	// "Top stacks" shows 20 rows; the button shows the rest, and is
	// there only when there is a rest.
	stacks := string(p.eval(t, `(function () {
		var t = document.querySelector("table.stacks"), b = document.querySelector("button.expand");
		var hidden = t.querySelectorAll("tr.more[hidden]").length, shown = t.querySelectorAll("tbody tr:not([hidden])").length;
		if (b) { b.click(); }
		return JSON.stringify([shown, hidden, !!b, t.querySelectorAll("tr.more[hidden]").length]);
	})()`))
	ns := len(views[0].Stacks)
	want20 := fmt.Sprintf("[%d,%d,%v,0]", min(ns, 20), max(0, ns-20), ns > 20)
	t.Logf("top stacks: %d kept, page says %s", ns, stacks)
	if got := mustString(t, stacks); got != want20 {
		t.Errorf("top stacks (shown, hidden, button, hidden after a click) = %s, want %s for %d stacks", got, want20, ns)
	}
	zoom := string(p.eval(t, `(function () {
		var before = document.querySelectorAll("#flame-0 .fr").length;
		var frames = document.querySelectorAll("#flame-0 .fr:not(.anc)");
		frames[frames.length - 1].click();
		var zoomed = document.querySelectorAll("#flame-0 .fr.anc").length;
		document.querySelector("#flame-0").closest(".flame-box").querySelector(".flame-reset").click();
		return JSON.stringify([before, zoomed, document.querySelectorAll("#flame-0 .fr").length]);
	})()`))
	var z [3]int
	if err := json.Unmarshal([]byte(mustString(t, zoom)), &z); err != nil || z[1] == 0 || z[2] != z[0] {
		t.Errorf("flame zoom and reset: frames before, grey ancestors after a click, frames after reset = %s", zoom)
	}
}

func mustString(t *testing.T, raw string) string {
	t.Helper()
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return s
}

// inspectPage opens a static page and returns its charts as drawn, after
// checking it logged no error.
func inspectPage(t *testing.T, url string) ([]chartInfo, *cdpPage) {
	t.Helper()
	page := startChromium(t, url)
	waitFor(t, "the page's charts", func() bool {
		return string(page.eval(t, `typeof cacheheatCommon === "object" && document.readyState === "complete"`)) == "true"
	})
	if got := string(page.eval(t, `JSON.stringify(window.__cacheheatErrors)`)); got != `"[]"` {
		t.Errorf("%s: console errors %s", url, got)
	}
	charts := page.eval(t, `JSON.stringify(cacheheatCommon.inspect(window.cacheheatReport ? cacheheatReport.charts : cacheheatDiff.charts))`)
	return decodeCharts(t, charts), page
}

// inspectLive feeds rec's windows to a live view one by one and returns
// the live page's charts once they show every window.
func inspectLive(t *testing.T, rec *profile.Recording) []chartInfo {
	t.Helper()
	l, ts := newTestLive(t, LiveOptions{})
	page := startChromium(t, ts.URL+"/")
	waitFor(t, "the live page's hook", func() bool {
		return string(page.eval(t, `typeof cacheheatLive === "object"`)) == "true"
	})
	l.SetHeader(rec.Header)
	for i := range rec.Windows {
		w := rec.Windows[i]
		l.Publish(&w, testStatus{Windows: i + 1})
	}
	rows := len(rec.Header.Host.Topology.CPUs)
	var charts []chartInfo
	waitFor(t, "the live page to show every window", func() bool {
		charts = decodeCharts(t, page.eval(t, `JSON.stringify(cacheheatLive.inspect())`))
		for _, c := range charts {
			if c.ID == "cpu" {
				return c.Cells == rows*len(rec.Windows)
			}
		}
		return false
	})
	if got := string(page.eval(t, `JSON.stringify(cacheheatLive.errors())`)); got != `"[]"` {
		t.Errorf("live page: console errors %s", got)
	}
	return charts
}

func decodeCharts(t *testing.T, raw json.RawMessage) []chartInfo {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("inspect result %.200s: %v", raw, err)
	}
	var cs []chartInfo
	if err := json.Unmarshal([]byte(s), &cs); err != nil {
		t.Fatalf("inspect result %.200s: %v", s, err)
	}
	return cs
}

func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("needs Chromium at %s: %v", chromiumPath, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// A deadline only against hanging forever; nothing asserts on time.
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cdpPage is a Chrome DevTools Protocol connection to one page, over a
// minimal WebSocket client (text frames only), enough for Runtime.evaluate.
type cdpPage struct {
	conn net.Conn
	r    *bufio.Reader
	id   int
}

func startChromium(t *testing.T, pageURL string) *cdpPage {
	t.Helper()
	profileDir := t.TempDir()
	cmd := exec.Command(chromiumPath, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--user-data-dir="+profileDir, "--remote-debugging-port=0", "--window-size=1280,2000", pageURL)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Skipf("needs a runnable Chromium: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var port string
	waitFor(t, "Chromium's DevToolsActivePort", func() bool {
		b, err := os.ReadFile(filepath.Join(profileDir, "DevToolsActivePort"))
		if err != nil {
			return false
		}
		port, _, _ = strings.Cut(string(b), "\n")
		return port != ""
	})
	var wsURL string
	waitFor(t, "the page target", func() bool {
		resp, err := http.Get("http://127.0.0.1:" + port + "/json/list")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var targets []struct {
			Type, URL, WebSocketDebuggerURL string
		}
		if json.NewDecoder(resp.Body).Decode(&targets) != nil {
			return false
		}
		for _, tg := range targets {
			if tg.Type == "page" && strings.HasPrefix(tg.URL, pageURL) {
				wsURL = tg.WebSocketDebuggerURL
				return true
			}
		}
		return false
	})
	u, err := url.Parse(wsURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	key := make([]byte, 16)
	rand.Read(key)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		u.RequestURI(), u.Host, base64.StdEncoding.EncodeToString(key))
	p := &cdpPage{conn: conn, r: bufio.NewReader(conn)}
	resp, err := http.ReadResponse(p.r, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("DevTools WebSocket handshake: %v %v", resp, err)
	}
	return p
}

// eval runs expr in the page and returns its value as JSON.
func (p *cdpPage) eval(t *testing.T, expr string) json.RawMessage {
	t.Helper()
	p.id++
	msg, _ := json.Marshal(map[string]any{"id": p.id, "method": "Runtime.evaluate",
		"params": map[string]any{"expression": expr, "returnByValue": true}})
	if err := p.writeText(msg); err != nil {
		t.Fatalf("sending to DevTools: %v", err)
	}
	for {
		b, err := p.readMessage()
		if err != nil {
			t.Fatalf("reading from DevTools: %v", err)
		}
		var r struct {
			ID     int `json:"id"`
			Result struct {
				Result struct {
					Value json.RawMessage `json:"value"`
				} `json:"result"`
			} `json:"result"`
		}
		if json.Unmarshal(b, &r) == nil && r.ID == p.id {
			return r.Result.Result.Value
		}
	}
}

// writeText sends one masked text frame, as a WebSocket client must.
func (p *cdpPage) writeText(payload []byte) error {
	hdr := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	mask := make([]byte, 4)
	rand.Read(mask)
	hdr = append(hdr, mask...)
	masked := make([]byte, len(payload))
	for i, b := range payload {
		masked[i] = b ^ mask[i%4]
	}
	_, err := p.conn.Write(append(hdr, masked...))
	return err
}

// readMessage reads frames until a whole text message arrived.
func (p *cdpPage) readMessage() ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(p.r, h[:]); err != nil {
			return nil, err
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(p.r, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(p.r, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(p.r, buf); err != nil {
			return nil, err
		}
		if op := h[0] & 0x0f; op == 0x8 {
			return nil, fmt.Errorf("DevTools closed the connection")
		} else if op == 0x9 || op == 0xa {
			continue // ping/pong: Chromium does not need an answer here
		}
		msg = append(msg, buf...)
		if h[0]&0x80 != 0 {
			return msg, nil
		}
	}
}
