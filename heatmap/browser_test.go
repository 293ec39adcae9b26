package heatmap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

const chromiumPath = "/usr/bin/chromium"

// chromium runs headless Chromium on a local file with networking off
// (CSP aside, every host resolves to nothing and the proxy is a closed
// port), and returns the DOM after the page's scripts ran, or takes a
// screenshot when shot is set.
func chromium(t *testing.T, page, shot string) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("needs Chromium at %s (.ci/run installs it): %v", chromiumPath, err)
	}
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir(),
		"--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
		"--virtual-time-budget=10000", "--hide-scrollbars"}
	url := "file://" + page
	if shot != "" {
		args = append(args, "--window-size=1280,3000", "--screenshot="+shot, url)
	} else {
		args = append(args, "--window-size=1280,2000", "--dump-dom", url+"#selftest")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, lastLines(stderr.String(), 20))
	}
	return stdout.String()
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

type selftest struct {
	Charts []struct {
		ID       string   `json:"id"`
		NonBlank int      `json:"nonblank"`
		Unit     string   `json:"unit"`
		Bar      []string `json:"bar"`
		Overlaps []string `json:"overlaps"`
		Labels   int      `json:"labels"`
	} `json:"charts"`
	Flames int      `json:"flames"`
	Errors []string `json:"errors"`
	Pwned  string   `json:"pwned"`
}

var selftestRE = regexp.MustCompile(`(?s)<div id="cacheheat-selftest"[^>]*data-done="1"[^>]*>(.*?)</div>`)

// runSelftest opens a page in Chromium and returns what its self-test
// (common.js) found, and the DOM.
func runSelftest(t *testing.T, page string) (selftest, string) {
	t.Helper()
	dom := chromium(t, page, "")
	m := selftestRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's self-test did not run (script error before it?); DOM tail:\n%s", lastLines(dom, 5))
	}
	var st selftest
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &st); err != nil {
		t.Fatalf("self-test result %q: %v", m[1], err)
	}
	return st, dom
}

// checkInBrowser opens a report in Chromium and asserts its charts drew,
// no error was logged and no injected script ran.
func checkInBrowser(t *testing.T, page string, wantCharts int) string {
	t.Helper()
	st, dom := runSelftest(t, page)
	if len(st.Errors) > 0 {
		t.Errorf("console errors: %q", st.Errors)
	}
	if st.Pwned != "undefined" {
		t.Errorf("an injected script ran: window.__pwned is %s", st.Pwned)
	}
	if len(st.Charts) != wantCharts {
		t.Errorf("%d charts drawn, want %d", len(st.Charts), wantCharts)
	}
	for _, c := range st.Charts {
		if c.NonBlank < 1000 {
			t.Errorf("chart %s canvas has %d non-blank pixels", c.ID, c.NonBlank)
		}
		// Every colour bar says its unit, and no two texts of a chart
		// (axis labels, colour bar, legend) overlap where ECharts drew
		// them.
		if len(c.Overlaps) > 0 {
			t.Errorf("chart %s: overlapping texts %q", c.ID, c.Overlaps)
		}
		if c.Labels == 0 {
			t.Errorf("chart %s: no text found to check", c.ID)
		}
		if len(c.Bar) > 0 && (c.Unit == "" || !strings.Contains(strings.Join(c.Bar, "\n"), c.Unit)) {
			t.Errorf("chart %s: colour bar %q does not say its unit %q", c.ID, c.Bar, c.Unit)
		}
	}
	if st.Flames == 0 {
		t.Error("no flame graph frames drawn")
	}
	t.Logf("self-test: %d charts, %d flame frames, pixels %+v", len(st.Charts), st.Flames, st.Charts)
	return dom
}

// TestBrowserRealRecording records a bundled workload for real, renders
// its report and opens it in headless Chromium. With
// CACHEHEAT_UPDATE_SCREENSHOT=1 it also saves docs/report.png.
func TestBrowserRealRecording(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("needs Chromium at %s (.ci/run installs it): %v", chromiumPath, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: records a workload with BPF")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "cacheheat")
	build := exec.Command("go", "build", "-o", bin, "github.com/cacheheat/cacheheat/cmd/cacheheat")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cacheheat: %v\n%s", err, out)
	}
	rec := filepath.Join(dir, "falseshare.rec")
	out, err := exec.Command(bin, "record", "-q", "-o", rec, "--", bin, "workload", "run", "falseshare", "-d", "2s").CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("this host cannot record: %s", out)
	}
	if err != nil {
		t.Fatalf("cacheheat record: %v\n%s", err, out)
	}
	page := filepath.Join(dir, "falseshare.html")
	if out, err := exec.Command(bin, "report", rec, "-o", page).CombinedOutput(); err != nil {
		t.Fatalf("cacheheat report: %v\n%s", err, out)
	}
	r, err := profile.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	// Per-core, per-node, and one per latency histogram.
	checkInBrowser(t, page, 2+len(r.HistogramNames()))
	if os.Getenv("CACHEHEAT_UPDATE_SCREENSHOT") == "1" {
		shot := filepath.Join("..", "docs", "report.png")
		chromium(t, page, shot)
		t.Logf("wrote %s", shot)
	}
}

// TestBrowserHostileNames opens the hostile-names report in Chromium: no
// injected script runs and the names show as text.
func TestBrowserHostileNames(t *testing.T) {
	page := filepath.Join(t.TempDir(), "hostile.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := Render(f, hostileRecording(), Options{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dom := checkInBrowser(t, page, 4)
	for _, want := range []string{
		"&lt;/script&gt;&lt;script&gt;window.__pwned=1;alert(1)&lt;/script&gt;",
		"&lt;img src=x onerror=\"window.__pwned=1;alert(1)\"&gt;",
		"\"quoted\" 'single' name",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page does not show %q as text", want)
		}
	}
}
