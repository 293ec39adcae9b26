package collector

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Container runtimes name a container's cgroup after its id, and the
// kubelet a pod's after its uid. These are the directory names they use,
// with the systemd and the cgroupfs drivers:
//
//	docker-<id>.scope, cri-containerd-<id>.scope, crio-<id>.scope, libpod-<id>.scope
//	/docker/<id>, /kubepods/burstable/pod<uid>/<id>   (cgroupfs driver)
//	kubepods-burstable-pod<uid_with_underscores>.slice, pod<uid>
var (
	containerScope = regexp.MustCompile(`^(?:docker|cri-containerd|crio|libpod|containerd)-([0-9a-f]{64})\.scope$`)
	containerBare  = regexp.MustCompile(`^([0-9a-f]{64})$`)
	podSlice       = regexp.MustCompile(`^kubepods(?:-[a-z]+)*-pod([0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12})\.slice$`)
	podDir         = regexp.MustCompile(`^pod([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)
)

// cgroupDirID says what one cgroup directory name names: a container id
// (pod false) or a pod uid (pod true), or "" for neither.
func cgroupDirID(name string) (id string, pod bool) {
	if m := containerScope.FindStringSubmatch(name); m != nil {
		return m[1], false
	}
	if m := containerBare.FindStringSubmatch(name); m != nil {
		return m[1], false
	}
	if m := podSlice.FindStringSubmatch(name); m != nil {
		return strings.ReplaceAll(m[1], "_", "-"), true
	}
	if m := podDir.FindStringSubmatch(name); m != nil {
		return m[1], true
	}
	return "", false
}

// ContainerOf returns the container of a cgroup path: the id of the
// innermost container cgroup on the path, else the uid of the pod it is
// in, else "".
func ContainerOf(cgroupPath string) string {
	pod := ""
	parts := strings.Split(strings.Trim(cgroupPath, "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		id, isPod := cgroupDirID(parts[i])
		switch {
		case id == "":
		case !isPod:
			return id
		case pod == "":
			pod = id
		}
	}
	return pod
}

// ProcContainer is the container of a process, from its cgroup v2 path in
// /proc/PID/cgroup, or "".
func ProcContainer(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return ContainerOf(p)
		}
	}
	return ""
}

// procContainers caches ProcContainer by pid for the length of a
// recording: a process does not change containers.
type procContainers struct {
	mu    sync.Mutex
	byPID map[int]string
}

func (c *procContainers) get(pid int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.byPID[pid]; ok {
		return v
	}
	if c.byPID == nil {
		c.byPID = map[int]string{}
	}
	v := ProcContainer(pid)
	c.byPID[pid] = v
	return v
}

var hexID = regexp.MustCompile(`^[0-9a-f]{12,64}$`)
var podUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// resolveCgroupArg turns -G's argument into a cgroup path: a path (absolute
// or below the cgroup v2 mount) is kept; a container id (full, or a prefix
// of at least 12 hex digits as `docker ps` shows it) or a pod uid that is
// not a path names the cgroup of that container or pod.
func resolveCgroupArg(g string) (string, error) {
	p := cgroupPath(g)
	if _, err := os.Stat(p); err == nil || !(hexID.MatchString(g) || podUID.MatchString(g)) {
		return p, nil
	}
	return findContainerCgroup(cgroup2Mount(), g)
}

// findContainerCgroup finds the outermost cgroup directory under mount
// named after the container id (or prefix) or pod uid want.
func findContainerCgroup(mount, want string) (string, error) {
	matches := map[string]string{} // id -> shallowest directory
	_ = filepath.WalkDir(mount, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		id, _ := cgroupDirID(d.Name())
		if id == "" || !strings.HasPrefix(id, want) {
			return nil
		}
		if _, ok := matches[id]; !ok {
			matches[id] = p
		}
		return filepath.SkipDir // its descendants are the same container's
	})
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("%w: no cgroup under %s belongs to a container or pod %s", ErrNoTarget, mount, want)
	case 1:
		for _, p := range matches {
			return p, nil
		}
	}
	ids := make([]string, 0, len(matches))
	for id := range matches {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return "", fmt.Errorf("%w: %s matches %d containers (%s): give more of the id", ErrNoTarget, want, len(ids), strings.Join(ids, ", "))
}
