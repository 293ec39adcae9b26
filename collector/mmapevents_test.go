package collector

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cacheheat/cacheheat/host"
)

// TestMmapWatcherCgroup: a watcher of a cgroup gets the records of the
// cgroup's processes and none of a process outside it, so a recorder of a
// quiet cgroup is not woken by the rest of the host.
func TestMmapWatcherCgroup(t *testing.T) {
	needBPF(t)
	cg := filepath.Join(cgroup2Mount(), "cacheheat-test-mmap-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(cg) })
	cpus, err := host.OnlineCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	w, err := newMmapWatcher(cpus, nil, nil, cg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.closeRings()
	if !w.byCgroup {
		t.Fatalf("the kernel refused cgroup mapping events for %s", cg)
	}
	outside := exec.Command("/bin/true")
	if err := outside.Run(); err != nil {
		t.Fatal(err)
	}
	// Moves itself into the cgroup, then execs: its exec and mappings
	// are the cgroup's.
	inside := exec.Command("/bin/sh", "-c", "echo $$ > "+cg+"/cgroup.procs && exec /bin/true")
	if out, err := inside.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var recs []mmapRecord
	for _, r := range w.rings {
		recs, _ = r.read(recs)
	}
	var in, out, other int
	for _, r := range recs {
		switch r.pid {
		case inside.Process.Pid:
			in++
		case outside.Process.Pid:
			out++
		default:
			other++
		}
	}
	t.Logf("%d records: %d of the process in the cgroup, %d of the one outside, %d of others", len(recs), in, out, other)
	if in == 0 {
		t.Errorf("no record of the process that exec'd in the cgroup")
	}
	if out != 0 || other != 0 {
		t.Errorf("records of processes outside the cgroup: %d of the one started, %d of others", out, other)
	}
}
