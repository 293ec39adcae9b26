package web

import (
	"bufio"
	"context"
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

	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/profile"
)

const chromiumPath = "/usr/bin/chromium"

// TestLivePageInChromium loads the live page in headless Chromium, publishes
// windows one by one and reads, through the page's cacheheatLive hook, the
// number of cells in the per-core chart's series: it must grow with the
// windows (2 CPUs: 2 cells per window).
func TestLivePageInChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("needs Chromium at %s: %v", chromiumPath, err)
	}
	saved := EChartsJS
	EChartsJS = heatmap.EChartsJS()
	t.Cleanup(func() { EChartsJS = saved })
	l, ts := newTestLive(t, LiveOptions{})
	l.SetHeader(testHeader())

	page := startChromium(t, ts.URL+"/")
	eval := func(expr string) json.RawMessage { return page.eval(t, expr) }
	// Wait for the page's script to have run and its stream to be open.
	waitFor(t, "the live page's hook", func() bool {
		return string(eval(`typeof cacheheatLive === "object" && cacheheatLive.charts`)) == "true"
	})
	prev := 0
	for i := 0; i < 4; i++ {
		w := testWindow(i)
		l.Publish(&w, testStatus{Windows: i + 1, Target: evil})
		want := 2 * (i + 1)
		var cells int
		waitFor(t, fmt.Sprintf("%d per-core cells", want), func() bool {
			json.Unmarshal(eval(`cacheheatLive.cells("cpu-chart")`), &cells)
			return cells >= want
		})
		if cells <= prev {
			t.Fatalf("after window %d the chart has %d cells, not more than %d", i, cells, prev)
		}
		prev = cells
	}
	// Hostile strings are shown as text, never run: the status line holds
	// the literal text and no alert hook was planted.
	status := string(eval(`document.getElementById("status").textContent`))
	if !strings.Contains(status, `\u003c/script\u003e`) && !strings.Contains(status, `</script>`) {
		t.Errorf("status line %s does not show the target text", status)
	}
	if got := string(eval(`document.querySelectorAll("#status img, #findings img, #status script").length`)); got != "0" {
		t.Errorf("hostile markup became elements: %s", got)
	}
	if got := string(eval(`document.getElementById("findings").textContent`)); !strings.Contains(got, "onerror=alert(2)") {
		t.Errorf("findings %s do not show the finding's title as text", got)
	}
	// At the end the page swaps in the final report, and Linger, which
	// waits for watching pages, returns once it was fetched.
	l.Finish(&profile.Recording{Header: testHeader(), Windows: []profile.Window{testWindow(0)}}, nil)
	waitFor(t, "the page to load the final report", func() bool {
		return string(eval(`location.pathname + " " + document.body.textContent`)) == `"/report REPORT host=h1 windows=1"`
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l.Linger(ctx)
	if ctx.Err() != nil {
		t.Errorf("Linger waited for a page that had loaded the report")
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
		"--no-first-run", "--user-data-dir="+profileDir, "--remote-debugging-port=0", pageURL)
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
