package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/profile"
)

// testRenderers stand in for the report packages where a test is about
// the server (routing, safety, headers), not about the report's content:
// they write which recording they were given, so a test can tell which
// file was served.
func testRenderers() Renderers {
	return Renderers{
		Report: func(w io.Writer, r io.Reader) error {
			rec, err := profile.Read(r)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "<html>REPORT host=%s windows=%d</html>", rec.Header.Host.Hostname, len(rec.Windows))
			return err
		},
		Diff: func(w io.Writer, base, newRec io.ReadSeeker) error {
			b, err := profile.Read(base)
			if err != nil {
				return err
			}
			n, err := profile.Read(newRec)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "<html>DIFF base=%d new=%d</html>", len(b.Windows), len(n.Windows))
			return err
		},
		Analyze: func(r io.ReadSeeker) ([]attribution.Finding, error) {
			if _, err := r.Seek(0, io.SeekStart); err != nil {
				return nil, err
			}
			rec, err := profile.Read(r)
			if err != nil {
				return nil, err
			}
			return make([]attribution.Finding, len(rec.Windows)%4), nil
		},
	}
}

// testDir builds a recordings directory and, beside it, a recording that
// must never be served:
//
//	outside/secret.rec            host SECRET (outside DIR)
//	dir/a.rec                     3 windows
//	dir/b.rec                     5 windows
//	dir/sub/c.rec                 2 windows
//	dir/notes.txt                 not a recording
//	dir/broken.rec                magic, then garbage
//	dir/link-in.rec  -> a.rec     symlink inside DIR (served)
//	dir/link-out.rec -> ../outside/secret.rec (refused)
//	dir/dirlink      -> ../outside           (refused)
func testDir(t *testing.T) (dir, secret string) {
	t.Helper()
	top := t.TempDir()
	dir = filepath.Join(top, "dir")
	out := filepath.Join(top, "outside")
	for _, d := range []string{dir, out, filepath.Join(dir, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret = writeRecording(t, out, "secret.rec", 1)
	rec, err := profile.ReadFile(secret)
	if err != nil {
		t.Fatal(err)
	}
	rec.Header.Host.Hostname = "SECRET"
	w, err := profile.Create(secret, rec.Header)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(profile.Trailer{EndReason: profile.EndDuration}); err != nil {
		t.Fatal(err)
	}
	writeRecording(t, dir, "a.rec", 3)
	writeRecording(t, dir, "b.rec", 5)
	writeRecording(t, filepath.Join(dir, "sub"), "c.rec", 2)
	must(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a recording"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "broken.rec"), []byte("CHEATREC\x07\x00garbage"), 0o644))
	must(t, os.Symlink("a.rec", filepath.Join(dir, "link-in.rec")))
	must(t, os.Symlink(filepath.Join("..", "outside", "secret.rec"), filepath.Join(dir, "link-out.rec")))
	must(t, os.Symlink(filepath.Join("..", "outside"), filepath.Join(dir, "dirlink")))
	return dir, secret
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newTestServer(t *testing.T, r Renderers) (*httptest.Server, string, string) {
	t.Helper()
	dir, secret := testDir(t)
	s, err := NewServer(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts, dir, secret
}

// get sends a raw request path (not re-encoded) and returns the response
// with its body read.
func get(t *testing.T, ts *httptest.Server, method, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = path // sent as is, so encoded dots reach the server encoded
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func checkSecurityHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	want := map[string]string{
		"Content-Security-Policy": ContentSecurityPolicy,
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: header %s = %q, want %q", what, k, got, v)
		}
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("%s: CSP %q does not default to 'none'", what, csp)
	}
}

func TestIndex(t *testing.T) {
	ts, _, _ := newTestServer(t, testRenderers())
	resp, body := get(t, ts, "GET", "/")
	if resp.StatusCode != 200 {
		t.Fatalf("GET / = %d: %s", resp.StatusCode, body)
	}
	checkSecurityHeaders(t, "index", resp.Header)
	for _, want := range []string{
		`href="/report?f=a.rec"`, `href="/report?f=b.rec"`, `href="/report?f=sub%2fc.rec"`, `href="/report?f=link-in.rec"`,
		"broken.rec", "unreadable", // listed with its reason, not hidden
		`<option value="b.rec">`, `action="/diff"`,
		"h1", "software", "duration",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("index lacks %q", want)
		}
	}
	for _, bad := range []string{"notes.txt", "link-out.rec", "secret", "SECRET", "dirlink", "<script>alert", "<img src=x"} {
		if strings.Contains(body, bad) {
			t.Errorf("index contains %q", bad)
		}
	}
	if !strings.Contains(body, "&lt;/script&gt;&lt;script&gt;alert(1)") {
		t.Errorf("index does not show the escaped target command")
	}
}

func TestIndexRows(t *testing.T) {
	dir, _ := testDir(t)
	s, err := NewServer(dir, testRenderers())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	got := map[string]IndexRow{}
	for _, r := range s.Rows(context.Background()) {
		got[r.Name] = r
	}
	for name, want := range map[string]struct{ windows, findings int }{
		"a.rec": {3, 3}, "b.rec": {5, 1}, "sub/c.rec": {2, 2}, "link-in.rec": {3, 3},
	} {
		r, ok := got[name]
		if !ok {
			t.Errorf("index lacks %s", name)
			continue
		}
		if r.Windows != want.windows || r.Findings != want.findings || r.DurationS != float64(want.windows) || r.State != profile.EndDuration || r.Host != "h1" || r.Mode != "software" {
			t.Errorf("%s: row %+v, want %d windows, %d findings", name, r, want.windows, want.findings)
		}
		if !strings.HasPrefix(r.Target, "command: </script>") {
			t.Errorf("%s: target %q", name, r.Target)
		}
	}
	if r := got["broken.rec"]; r.Err == "" {
		t.Errorf("broken.rec: row %+v has no error", r)
	}
	if len(got) != 5 {
		t.Errorf("index has %d rows, want 5: %v", len(got), got)
	}
	// A changed file is read again; an unchanged one comes from the cache.
	writeRecording(t, dir, "a.rec", 7)
	for _, r := range s.Rows(context.Background()) {
		if r.Name == "a.rec" && r.Windows != 7 {
			t.Errorf("a.rec after rewrite: %d windows, want 7", r.Windows)
		}
	}
}

func TestReport(t *testing.T) {
	ts, _, _ := newTestServer(t, testRenderers())
	for path, want := range map[string]string{
		"/report?f=a.rec":       "REPORT host=h1 windows=3",
		"/report?f=sub/c.rec":   "REPORT host=h1 windows=2",
		"/report?f=sub%2fc.rec": "REPORT host=h1 windows=2",
		"/report?f=./b.rec":     "REPORT host=h1 windows=5",
		"/report?f=link-in.rec": "REPORT host=h1 windows=3", // symlink inside DIR: served
	} {
		resp, body := get(t, ts, "GET", path)
		if resp.StatusCode != 200 || body != "<html>"+want+"</html>" {
			t.Errorf("GET %s = %d %q, want 200 %q", path, resp.StatusCode, body, want)
		}
		checkSecurityHeaders(t, path, resp.Header)
		if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
	}
	resp, body := get(t, ts, "GET", "/report?f=broken.rec")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "broken.rec: recording format version") {
		t.Errorf("broken.rec = %d %q, want 422 with the reason", resp.StatusCode, body)
	}
	resp, _ = get(t, ts, "HEAD", "/report?f=a.rec")
	if resp.StatusCode != 200 {
		t.Errorf("HEAD report = %d", resp.StatusCode)
	}
}

func TestDiff(t *testing.T) {
	ts, _, _ := newTestServer(t, testRenderers())
	resp, body := get(t, ts, "GET", "/diff?base=a.rec&new=b.rec")
	if resp.StatusCode != 200 || body != "<html>DIFF base=3 new=5</html>" {
		t.Errorf("diff = %d %q", resp.StatusCode, body)
	}
	checkSecurityHeaders(t, "diff", resp.Header)
	resp, body = get(t, ts, "GET", "/diff?base=a.rec&new=../outside/secret.rec")
	if resp.StatusCode != 400 || strings.Contains(body, "SECRET") {
		t.Errorf("diff with traversal = %d %q, want 400", resp.StatusCode, body)
	}
	resp, _ = get(t, ts, "GET", "/diff?base=a.rec")
	if resp.StatusCode != 400 {
		t.Errorf("diff without new = %d, want 400", resp.StatusCode)
	}
}

func TestTraversal(t *testing.T) {
	ts, _, secret := newTestServer(t, testRenderers())
	for path, code := range map[string]int{
		"/report?f=../outside/secret.rec":                 400,
		"/report?f=%2e%2e/outside/secret.rec":             400,
		"/report?f=%2e%2e%2foutside%2fsecret.rec":         400,
		"/report?f=..%2foutside%2fsecret.rec":             400,
		"/report?f=..%5coutside%5csecret.rec":             400,
		"/report?f=sub/../../outside/secret.rec":          400,
		"/report?f=sub/..":                                400,
		"/report?f=" + secret:                             400, // absolute
		"/report?f=%2F" + strings.TrimPrefix(secret, "/"): 400,
		"/report?f=":                                         400,
		"/report?f=a.rec%00":                                 400,
		"/report?f=link-out.rec":                             404, // symlink out of DIR
		"/report?f=dirlink/secret.rec":                       404, // symlinked directory out of DIR
		"/report?f=sub":                                      404, // not a regular file
		"/report?f=missing.rec":                              404,
		"/../outside/secret.rec":                             404, // no such route, whatever the path
		"/..%2foutside%2fsecret.rec":                         404,
		"/%2e%2e/outside/secret.rec":                         404,
		"/report/../../outside/secret.rec":                   404,
		"/diff?base=a.rec&new=%2e%2e%2foutside%2fsecret.rec": 400,
	} {
		resp, body := get(t, ts, "GET", path)
		if resp.StatusCode != code {
			t.Errorf("GET %s = %d, want %d (%q)", path, resp.StatusCode, code, body)
		}
		if strings.Contains(body, "SECRET") {
			t.Errorf("GET %s served the file outside DIR", path)
		}
		checkSecurityHeaders(t, path, resp.Header)
	}
}

func TestMethods(t *testing.T) {
	ts, _, _ := newTestServer(t, testRenderers())
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS"} {
		for _, path := range []string{"/", "/report?f=a.rec", "/diff?base=a.rec&new=b.rec"} {
			resp, _ := get(t, ts, m, path)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s = %d Allow %q, want 405 GET, HEAD", m, path, resp.StatusCode, resp.Header.Get("Allow"))
			}
			checkSecurityHeaders(t, m+" "+path, resp.Header)
		}
	}
}

func TestNoRenderer(t *testing.T) {
	ts, _, _ := newTestServer(t, Renderers{})
	resp, _ := get(t, ts, "GET", "/report?f=a.rec")
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("report without renderer = %d, want 501", resp.StatusCode)
	}
	checkSecurityHeaders(t, "501", resp.Header)
	resp, body := get(t, ts, "GET", "/")
	if resp.StatusCode != 200 || !strings.Contains(body, "n/a") {
		t.Errorf("index without analyzer = %d, want findings n/a", resp.StatusCode)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:1": true, "[::1]:80": true, "127.1.2.3:0": true,
		":8080": false, "0.0.0.0:8080": false, "192.168.1.2:80": false, "[::]:80": false, "example.com:80": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
