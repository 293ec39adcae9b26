package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingRenderers wraps testRenderers' report: it counts renders, notes
// the most that ran at once, and holds each render until release closes,
// so that concurrent requests really overlap.
type counting struct {
	renders, running, peak atomic.Int64
	release                chan struct{}
}

func (c *counting) renderers() Renderers {
	r := testRenderers()
	report := r.Report
	r.Report = func(w io.Writer, rec io.Reader) error {
		c.renders.Add(1)
		n := c.running.Add(1)
		for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
		}
		<-c.release
		c.running.Add(-1)
		return report(w, rec)
	}
	return r
}

// TestReportRendersShared: ten concurrent requests for one recording
// render it once, and a later request is served from the cache until the
// file changes (size or modification time). Before, each request read and
// rendered the recording on its own, at once.
func TestReportRendersShared(t *testing.T) {
	c := &counting{release: make(chan struct{})}
	ts, dir, _ := newTestServer(t, c.renderers())
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range codes {
		wg.Go(func() {
			resp, err := ts.Client().Get(ts.URL + "/report?f=a.rec")
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	// Let the requests pile up behind the first render, then finish it.
	waitFor(t, "the first render", func() bool { return c.renders.Load() >= 1 })
	time.Sleep(100 * time.Millisecond) // not a timing assertion: only gives the others a chance to arrive
	close(c.release)
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("request %d: status %d", i, code)
		}
	}
	if n := c.renders.Load(); n != 1 {
		t.Errorf("%d renders for 10 requests of one recording, want 1", n)
	}
	if resp, _ := get(t, ts, "GET", "/report?f=a.rec"); resp.StatusCode != 200 || c.renders.Load() != 1 {
		t.Errorf("a later request: status %d, %d renders; want 200 from the cache", resp.StatusCode, c.renders.Load())
	}
	// A new recording under the same name is rendered afresh.
	writeRecording(t, dir, "a.rec", 4)
	future := time.Now().Add(time.Hour)
	must(t, os.Chtimes(filepath.Join(dir, "a.rec"), future, future))
	if resp, body := get(t, ts, "GET", "/report?f=a.rec"); resp.StatusCode != 200 || c.renders.Load() != 2 || body != "<html>REPORT host=h1 windows=4</html>" {
		t.Errorf("after the file changed: status %d, %d renders, body %q; want a fresh render of 4 windows", resp.StatusCode, c.renders.Load(), body)
	}
}

// serveWith serves dir through c's renderers with a render cache of
// limit renders at once within budget bytes; wait, when not 0, shortens
// how long a request queues for room.
func serveWith(t *testing.T, dir string, c *counting, limit int, budget int64, wait time.Duration) *httptest.Server {
	t.Helper()
	s, err := NewServer(dir, c.renderers())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.pages = newRenderCache(limit, defaultCacheBytes, budget)
	if wait != 0 {
		s.pages.budget.wait = wait
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

// TestRenderLimit: with a limit of 2, renders of different recordings
// never run more than 2 at once.
func TestRenderLimit(t *testing.T) {
	c := &counting{release: make(chan struct{})}
	dir, _ := testDir(t)
	ts := serveWith(t, dir, c, 2, DefaultMemoryBudget, 0)
	names := []string{"a.rec", "b.rec", "sub/c.rec", "link-in.rec"}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			resp, err := ts.Client().Get(ts.URL + "/report?f=" + n)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	waitFor(t, "two renders", func() bool { return c.running.Load() == 2 })
	time.Sleep(100 * time.Millisecond) // gives a third render the chance to start, if the limit let it
	if p := c.peak.Load(); p != 2 {
		t.Errorf("%d renders at once, want at most 2 (and 2 reached)", p)
	}
	close(c.release)
	wg.Wait()
	if n := c.renders.Load(); n != int64(len(names)) {
		t.Errorf("%d renders, want %d", n, len(names))
	}
	if p := c.peak.Load(); p > 2 {
		t.Errorf("peak %d renders at once, want at most 2", p)
	}
}

// TestRenderBudget: renders reserve their recordings' renderCost from the
// memory budget, so with room for one at a time only one runs, whatever
// the CPU limit; a request that finds no room within the queue wait is
// answered 503 with Retry-After, and once the renders end, requests are
// served again.
func TestRenderBudget(t *testing.T) {
	c := &counting{release: make(chan struct{})}
	dir, _ := testDir(t)
	fi, err := os.Stat(filepath.Join(dir, "b.rec"))
	if err != nil {
		t.Fatal(err)
	}
	// Room for one render of the largest file, not two of the smallest.
	ts := serveWith(t, dir, c, 8, renderCost(fi.Size())+renderCost(0)/2, 300*time.Millisecond)
	var wg sync.WaitGroup
	type answer struct {
		code  int
		retry string
	}
	answers := make(chan answer, 3)
	for _, n := range []string{"a.rec", "b.rec", "sub/c.rec"} {
		wg.Go(func() {
			resp, err := ts.Client().Get(ts.URL + "/report?f=" + n)
			if err != nil {
				t.Error(err)
				answers <- answer{}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After")}
		})
	}
	// The two that found no room give up after the queue wait, while the
	// one render is held.
	busy := 0
	for range 2 {
		a := <-answers
		if a.code == http.StatusServiceUnavailable && a.retry != "" {
			busy++
		} else {
			t.Errorf("a waiting request: status %d, Retry-After %q", a.code, a.retry)
		}
	}
	close(c.release)
	wg.Wait()
	if a := <-answers; a.code != 200 {
		t.Errorf("the render that ran: status %d", a.code)
	}
	if p := c.peak.Load(); p != 1 || busy != 2 {
		t.Errorf("%d renders at once and %d answered busy; want 1 and 2", p, busy)
	}
	if resp, _ := get(t, ts, "GET", "/report?f=a.rec"); resp.StatusCode != 200 {
		t.Errorf("after the renders: status %d, want 200", resp.StatusCode)
	}
}
