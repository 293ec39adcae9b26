package collector

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var (
	cid  = strings.Repeat("0123456789abcdef", 4)
	cid2 = "0123456789ab" + strings.Repeat("f", 52)
	pod  = "6d0b6c4e-1f3a-4b8e-9c2d-5a7e8f9b0c1d"
)

func TestContainerOf(t *testing.T) {
	podU := strings.ReplaceAll(pod, "-", "_")
	for path, want := range map[string]string{
		"/system.slice/docker-" + cid + ".scope": cid,
		"/docker/" + cid:                         cid,
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podU + ".slice/cri-containerd-" + cid + ".scope": cid,
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + podU + ".slice":                                  pod,
		"/kubepods/besteffort/pod" + pod + "/" + cid:                                                                         cid,
		"/kubepods/pod" + pod:                               pod,
		"/machine.slice/libpod-" + cid + ".scope/container": cid,
		"/system.slice/crio-" + cid + ".scope":              cid,
		"/system.slice/crio-conmon-" + cid + ".scope":       "",
		"/system.slice/nginx.service":                       "",
		"/user.slice/user-1000.slice/docker-1234.scope":     "",
		"/": "",
	} {
		if got := ContainerOf(path); got != want {
			t.Errorf("ContainerOf(%q) = %q, want %q", path, got, want)
		}
	}
}

// -G with a container id, a 12-digit prefix or a pod uid finds the
// outermost cgroup named after it; an ambiguous prefix and an unknown id
// are usage errors that say why.
func TestFindContainerCgroup(t *testing.T) {
	root := t.TempDir()
	podDirPath := filepath.Join(root, "kubepods.slice", "kubepods-pod"+strings.ReplaceAll(pod, "-", "_")+".slice")
	c1 := filepath.Join(podDirPath, "cri-containerd-"+cid+".scope")
	c2 := filepath.Join(root, "system.slice", "docker-"+cid2+".scope")
	for _, d := range []string{filepath.Join(c1, "inner"), c2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for want, path := range map[string]string{cid: c1, cid[:16]: c1, pod: podDirPath, cid2[:13]: c2} {
		got, err := findContainerCgroup(root, want)
		if err != nil || got != path {
			t.Errorf("findContainerCgroup(%s) = %q, %v; want %q", want, got, err, path)
		}
	}
	if _, err := findContainerCgroup(root, cid[:12]); err == nil || !errors.Is(err, ErrNoTarget) || !strings.Contains(err.Error(), "matches 2 containers") {
		t.Errorf("ambiguous prefix: %v", err)
	}
	if _, err := findContainerCgroup(root, "deadbeefdeadbeef"); err == nil || !errors.Is(err, ErrNoTarget) {
		t.Errorf("unknown id: %v", err)
	}
}

// cgroupWindows: deltas per cgroup, named by a walk of the mount; a cgroup
// whose directory is gone is reported once more as removed and deleted.
func TestCgroupWindows(t *testing.T) {
	root := t.TempDir()
	live := filepath.Join(root, "live.slice")
	gone := filepath.Join(root, "gone.slice")
	for _, d := range []string{live, gone} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ino := func(p string) uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	liveID, goneID := ino(live), ino(gone)
	val := func(clock, runq0 uint64) *cgroupVal {
		v := &cgroupVal{}
		v.Counts[0] = clock
		v.Runq[3] = runq0
		v.RunqNs = runq0 * 10
		return v
	}
	names := newCgroupNames(root)
	prev := &snapshot{cgroups: map[uint64]*cgroupVal{liveID: val(100, 1), goneID: val(5, 0)}}
	cur := &snapshot{cgroups: map[uint64]*cgroupVal{liveID: val(150, 4), goneID: val(5, 0)}}
	var forgotten []uint64
	forget := func(id uint64) error { forgotten = append(forgotten, id); return nil }

	ws, err := cgroupWindows(prev, cur, names, []string{"cpu-clock"}, forget)
	if err != nil {
		t.Fatal(err)
	}
	// The idle cgroup has no change and is left out.
	if len(ws) != 1 || ws[0].Path != "/live.slice" || ws[0].Counts["cpu-clock"] != 50 || ws[0].Runq[3] != 3 || ws[0].RunqNS != 30 || ws[0].Removed {
		t.Fatalf("first window: %+v", ws)
	}

	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	names.lastWalk = names.lastWalk.Add(-2 * cgroupRewalk) // the periodic walk is due
	ws, err = cgroupWindows(cur, cur, names, []string{"cpu-clock"}, forget)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || !ws[0].Removed || ws[0].ID != goneID || ws[0].Path != "/gone.slice" {
		t.Fatalf("after removal: %+v", ws)
	}
	if len(forgotten) != 1 || forgotten[0] != goneID {
		t.Errorf("deleted from the map: %v, want [%d]", forgotten, goneID)
	}
}
