package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cacheheat/cacheheat/promexporter/dashboard"
)

// TestExporterWithPrometheus runs the exporter as a user would, with a real
// Prometheus scraping it every second and a workload in a cgroup of the
// test's own, named like a docker container's. It checks the metrics of
// that cgroup, promtool's lint, every panel query of the committed Grafana
// dashboard against Prometheus, and that SIGTERM releases every BPF object
// the exporter held.
func TestExporterWithPrometheus(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the exporter loads BPF programs")
	}
	if testing.Short() {
		t.Skip("runs a workload and Prometheus for ~30 s; skipped with -short")
	}
	for _, tool := range []string{"prometheus", "promtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (Debian package prometheus): %v", tool, err)
		}
	}
	mount := cgroup2MountFromMountinfo(t)
	bin := cacheheatBinary(t)

	// The workload's cgroup: a docker-style scope, so the container label
	// and the per-container panels have something to show.
	sum := sha256.Sum256([]byte(fmt.Sprintf("cacheheat-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())))
	id := hex.EncodeToString(sum[:])
	parent := filepath.Join(mount, fmt.Sprintf("cacheheat-e2e-%d.slice", os.Getpid()))
	cg := filepath.Join(parent, "docker-"+id+".scope")
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatalf("creating the test's cgroup: %v", err)
	}
	t.Cleanup(func() {
		os.Remove(cg)
		os.Remove(parent)
	})
	cgPath := "/" + strings.TrimPrefix(strings.TrimPrefix(cg, mount), "/")

	// The exporter, on a port the kernel picks.
	exp := exec.Command(bin, "exporter", "--listen", "127.0.0.1:0", "-i", "500ms")
	expOut, err := exp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var expErr bytes.Buffer
	exp.Stderr = &expErr
	if err := exp.Start(); err != nil {
		t.Fatal(err)
	}
	expDone := make(chan error, 1)
	go func() { expDone <- exp.Wait() }()
	t.Cleanup(func() {
		exp.Process.Kill()
		<-expDone
	})
	stdout := bufio.NewScanner(expOut)
	if !stdout.Scan() {
		t.Fatalf("exporter printed nothing; stderr: %s", expErr.String())
	}
	m := regexp.MustCompile(`http://(\S+)/metrics`).FindStringSubmatch(stdout.Text())
	if m == nil {
		t.Fatalf("no address in the exporter's first line %q", stdout.Text())
	}
	addr := m[1]
	restOut := make(chan string, 1)
	go func() {
		var b strings.Builder
		for stdout.Scan() {
			b.WriteString(stdout.Text() + "\n")
		}
		restOut <- b.String()
	}()

	// The workload, started straight into the cgroup (clone3 with
	// CLONE_INTO_CGROUP), so all of it counts there.
	cgfd, err := syscall.Open(cg, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	work := exec.Command(bin, "workload", "run", "rcu", "--variant", "bad", "-t", "2", "-d", "120s")
	work.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgfd}
	if err := work.Start(); err != nil {
		syscall.Close(cgfd)
		t.Fatalf("starting the workload in %s: %v", cg, err)
	}
	syscall.Close(cgfd)
	workDone := make(chan struct{})
	go func() { work.Wait(); close(workDone) }()
	t.Cleanup(func() {
		work.Process.Kill()
		<-workDone
	})

	// /metrics shows the cgroup with rising CPU seconds (cpu-clock) and
	// a run-queue histogram that has counts.
	first := waitFamilies(t, addr, func(f map[string]*dto.MetricFamily) bool {
		return cgroupCPUSeconds(f, cgPath) > 0 && runqCount(f, cgPath) > 0
	})
	c1 := cgroupCPUSeconds(first, cgPath)
	second := waitFamilies(t, addr, func(f map[string]*dto.MetricFamily) bool {
		return cgroupCPUSeconds(f, cgPath) > c1
	})
	t.Logf("cgroup %s: CPU %.3f -> %.3f s, %d run-queue latencies", cgPath, c1, cgroupCPUSeconds(second, cgPath), runqCount(second, cgPath))
	if got := labelOf(second["cacheheat_cgroup_cpu_seconds_total"], "cgroup", cgPath, "container"); got != id {
		t.Errorf("container label of %s = %q, want %q", cgPath, got, id)
	}

	// promtool's lint of the exposition.
	body := scrape(t, addr)
	lint := exec.Command("promtool", "check", "metrics")
	lint.Stdin = bytes.NewReader(body)
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	unsupported := map[string]bool{}
	for _, mm := range second["cacheheat_event_unsupported"].GetMetric() {
		for _, l := range mm.GetLabel() {
			if l.GetName() == "event" {
				unsupported[l.GetValue()] = true
			}
		}
	}

	// A real Prometheus, scraping every second.
	promAddr := freeAddr(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: cacheheat\n    static_configs:\n      - targets: ['%s']\n", addr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	var promLog bytes.Buffer
	prom.Stdout, prom.Stderr = &promLog, &promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	promDone := make(chan struct{})
	go func() { prom.Wait(); close(promDone) }()
	t.Cleanup(func() {
		prom.Process.Signal(syscall.SIGTERM)
		select {
		case <-promDone:
		case <-time.After(10 * time.Second):
			prom.Process.Kill()
			<-promDone
		}
	})

	// Every panel's query returns data, or names only events this host
	// cannot count (the exporter says so), or is the list of such events
	// on a host that can count them all.
	b, err := os.ReadFile("../../deploy/grafana/cacheheat.json")
	if err != nil {
		t.Fatal(err)
	}
	exprs := dashboard.Exprs(b)
	if len(exprs) == 0 {
		t.Fatal("no panel queries in deploy/grafana/cacheheat.json")
	}
	vars := strings.NewReplacer("$__rate_interval", "10s", "$instance", ".*", "$event", ".*", "$cgroup", ".*", "$reason", ".*")
	eventName := regexp.MustCompile(`event="([^"]+)"`)
	deadline := time.Now().Add(2 * time.Minute)
	for _, e := range exprs {
		q := vars.Replace(e)
		var needs []string
		for _, m := range eventName.FindAllStringSubmatch(q, -1) {
			needs = append(needs, m[1])
		}
		allUnsupported := len(needs) > 0
		for _, n := range needs {
			allUnsupported = allUnsupported && unsupported[n]
		}
		if allUnsupported || (strings.Contains(q, "cacheheat_event_unsupported") && len(unsupported) == 0) {
			n, err := promQuery(promAddr, q)
			if err != nil {
				t.Errorf("query %s: %v", q, err)
			}
			t.Logf("%d series (may be 0: the host cannot count %v): %s", n, needs, oneLine(q))
			continue
		}
		for {
			n, err := promQuery(promAddr, q)
			if err == nil && n > 0 {
				t.Logf("%d series: %s", n, oneLine(q))
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("no data for panel query %s (err %v)\nprometheus log:\n%s", q, err, tail(promLog.String(), 2000))
				break
			}
			time.Sleep(time.Second)
		}
	}

	// SIGTERM: the exporter exits 0 and every BPF program, map and link it
	// held is gone from the kernel.
	ids := bpfIDs(t, exp.Process.Pid)
	if len(ids["prog_id"]) == 0 || len(ids["map_id"]) == 0 || len(ids["link_id"]) == 0 {
		t.Fatalf("the exporter holds no BPF objects? %v", ids)
	}
	if err := exp.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-expDone:
		expDone <- err // for the cleanup
		if err != nil {
			t.Fatalf("exporter after SIGTERM: %v; stderr: %s", err, expErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("exporter still running 30 s after SIGTERM")
	}
	if out := <-restOut; !strings.Contains(out, "every bpf object released") {
		t.Errorf("exporter's last words %q", out)
	}
	// The kernel frees programs and links through deferred work after the
	// last fd closes: the ids go away shortly after the process exits.
	release := time.Now().Add(30 * time.Second)
	for kind, list := range ids {
		for _, id := range list {
			for {
				err := bpfObjectGone(kind, id)
				if err == nil {
					break
				}
				if time.Now().After(release) {
					t.Errorf("%s %d: %v", kind, id, err)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	t.Logf("released after SIGTERM: %d programs, %d maps, %d links", len(ids["prog_id"]), len(ids["map_id"]), len(ids["link_id"]))
}

// cgroup2MountFromMountinfo finds the cgroup v2 mount, which on hybrid
// hosts is /sys/fs/cgroup/unified.
func cgroup2MountFromMountinfo(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("needs /proc/self/mountinfo: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// ... mount-point ... - fstype source options
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 1 && g[0] == "cgroup2" {
			return f[4]
		}
	}
	t.Skip("needs a cgroup v2 mount (none in /proc/self/mountinfo)")
	return ""
}

func scrape(t *testing.T, addr string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping the exporter: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scraping the exporter: %d %v", resp.StatusCode, err)
	}
	return b
}

// waitFamilies scrapes until ok holds (or fails after a generous limit,
// which is a hang, not a speed goal).
func waitFamilies(t *testing.T, addr string, ok func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p := expfmt.NewTextParser(model.UTF8Validation)
		f, err := p.TextToMetricFamilies(bytes.NewReader(scrape(t, addr)))
		if err != nil {
			t.Fatalf("parsing /metrics: %v", err)
		}
		if ok(f) {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter's metrics never showed the test's cgroup; have %d families", len(f))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func labelOf(f *dto.MetricFamily, key, keyValue, name string) string {
	for _, m := range f.GetMetric() {
		if hasLabel(m, key, keyValue) {
			for _, l := range m.GetLabel() {
				if l.GetName() == name {
					return l.GetValue()
				}
			}
		}
	}
	return ""
}

func cgroupCPUSeconds(f map[string]*dto.MetricFamily, cg string) float64 {
	for _, m := range f["cacheheat_cgroup_cpu_seconds_total"].GetMetric() {
		if hasLabel(m, "cgroup", cg) {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func runqCount(f map[string]*dto.MetricFamily, cg string) uint64 {
	for _, m := range f["cacheheat_runqueue_latency_seconds"].GetMetric() {
		if hasLabel(m, "cgroup", cg) {
			return m.GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// promQuery runs an instant query and returns the number of series.
func promQuery(addr, q string) (int, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("prometheus: %s", r.Error)
	}
	return len(r.Data.Result), nil
}

// bpfIDs lists the ids of the BPF programs, maps and links a process holds
// open, from its fdinfo.
func bpfIDs(t *testing.T, pid int) map[string][]uint32 {
	t.Helper()
	ids := map[string][]uint32{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fdinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, fd := range fds {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || (k != "prog_id" && k != "map_id" && k != "link_id") {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil || seen[k+v] {
				continue
			}
			seen[k+v] = true
			ids[k] = append(ids[k], uint32(n))
		}
	}
	return ids
}

// bpfObjectGone is nil when the kernel has no object of that kind and id.
// Ids are allocated cyclically, so a released id is not handed out again
// at once.
func bpfObjectGone(kind string, id uint32) error {
	var err error
	switch kind {
	case "prog_id":
		var p *ebpf.Program
		if p, err = ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
			p.Close()
		}
	case "map_id":
		var m *ebpf.Map
		if m, err = ebpf.NewMapFromID(ebpf.MapID(id)); err == nil {
			m.Close()
		}
	case "link_id":
		var l link.Link
		if l, err = link.NewFromID(link.ID(id)); err == nil {
			l.Close()
		}
	}
	switch {
	case err == nil:
		return errors.New("still exists after the exporter exited")
	case errors.Is(err, os.ErrNotExist):
		return nil
	}
	return fmt.Errorf("cannot tell whether it was released: %w", err)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// A non-loopback --listen needs --allow-remote; bad numbers are usage
// errors. None of these loads anything.
func TestExporterUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"exporter", "--listen", "0.0.0.0:9632"},
		{"exporter", "--max-cgroups", "0"},
		{"exporter", "-F", "0"},
		{"exporter", "-i", "1ms"},
		{"exporter", "extra"},
	} {
		code, _, stderr := runCmd(args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("cacheheat %v: exit %d, stderr %q; want 2 and one line", args, code, stderr)
		}
	}
	_, _, stderr := runCmd("exporter", "--listen", "0.0.0.0:9632")
	if !strings.Contains(stderr, "--allow-remote") {
		t.Errorf("non-loopback refusal does not name --allow-remote: %q", stderr)
	}
}

// record -G takes a container id prefix; inspect names the container of
// the process that ran in it.
func TestRecordContainerTarget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: recording loads BPF programs")
	}
	mount := cgroup2MountFromMountinfo(t)
	bin := cacheheatBinary(t)
	sum := sha256.Sum256([]byte(fmt.Sprintf("cacheheat-record-%d-%d", os.Getpid(), time.Now().UnixNano())))
	id := hex.EncodeToString(sum[:])
	// A scope directly under the root is enough: the runtime's slice is
	// not part of the pattern.
	cg := filepath.Join(mount, "docker-"+id+".scope")
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatalf("creating the test's cgroup: %v", err)
	}
	t.Cleanup(func() { os.Remove(cg) })
	cgfd, err := syscall.Open(cg, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	work := exec.Command(bin, "workload", "run", "rcu", "-t", "2", "-d", "60s")
	work.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgfd}
	err = work.Start()
	syscall.Close(cgfd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { work.Process.Kill(); work.Wait() })

	rec := filepath.Join(t.TempDir(), "c.rec")
	out, err := exec.Command(bin, "record", "-G", id[:12], "-d", "2s", "-q", "-o", rec).CombinedOutput()
	if err != nil {
		t.Fatalf("record -G %s: %v\n%s", id[:12], err, out)
	}
	js, err := exec.Command(bin, "inspect", "--json", rec).Output()
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Target struct {
			Kind   string `json:"kind"`
			Cgroup string `json:"cgroup"`
		} `json:"target"`
		Processes []struct {
			PID       int    `json:"pid"`
			Container string `json:"container"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(js, &s); err != nil {
		t.Fatal(err)
	}
	if s.Target.Cgroup != cg {
		t.Errorf("target cgroup %q, want %q", s.Target.Cgroup, cg)
	}
	found := false
	for _, p := range s.Processes {
		if p.PID == work.Process.Pid {
			found = true
			if p.Container != id {
				t.Errorf("workload's container %q, want %q", p.Container, id)
			}
		}
	}
	if !found {
		t.Fatalf("workload pid %d not among the recorded processes: %s", work.Process.Pid, js)
	}
	text, _ := exec.Command(bin, "inspect", rec).Output()
	if !strings.Contains(string(text), "container "+id[:12]) {
		t.Errorf("inspect does not name the container:\n%s", text)
	}
	html := filepath.Join(t.TempDir(), "c.html")
	if out, err := exec.Command(bin, "report", rec, "-o", html).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(html); !bytes.Contains(b, []byte("[container "+id[:12]+"]")) {
		t.Error("the report does not name the container")
	}
}

// TestExporterUnprivileged: an exporter that cannot load its BPF programs
// (run as nobody) exits 3 saying why, and never printed that it serves
// metrics: it used to print "serving metrics at ..." first.
func TestExporterUnprivileged(t *testing.T) {
	needRoot(t) // to run the binary as another user
	dir, err := os.MkdirTemp("", "cacheheat-nobody-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	b, err := os.ReadFile(cacheheatBinary(t))
	must(t, err)
	bin := filepath.Join(dir, "cacheheat")
	must(t, os.WriteFile(bin, b, 0o755))
	cmd := exec.Command(bin, "exporter", "--listen", "127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if code := exitStatus(err); code != exitHost || stdout.Len() != 0 || stderr.Len() == 0 {
		t.Errorf("exporter as nobody: exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout and the reason", code, stdout.String(), stderr.String(), exitHost)
	}
}
