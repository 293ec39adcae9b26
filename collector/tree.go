package collector

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A command target's process group holds what it starts, until one of
// its descendants calls setsid (a daemon, `setsid CMD`, a shell's job
// control): that one leaves the group, and signals to the group no longer
// reach it. A cgroup holds every descendant whatever it does, so each
// command of a recording is put in one of its own (tree) before it is
// released, and ending the command ends everything in that cgroup.

// tree is the cgroup v2 directory that holds a recording's commands and
// everything they start.
type tree struct {
	dir string
}

// newTree creates the cgroup for a recording's commands, below the
// recorder's own cgroup. An error says why not; the commands then have
// only their process group.
func newTree() (*tree, error) {
	mount := cgroup2Mount()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(mount, &fs); err != nil || fs.Type != cgroup2Magic {
		return nil, fmt.Errorf("no cgroup v2 file system at %s", mount)
	}
	own, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(mount, own, fmt.Sprintf("cacheheat-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	return &tree{dir: dir}, nil
}

// ownCgroup is this process's cgroup v2 path ("0::PATH" in
// /proc/self/cgroup).
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Clean("/" + p), nil
		}
	}
	return "", errors.New("no cgroup v2 entry in /proc/self/cgroup")
}

// add moves a process into the tree: the gate, before it execs the
// command, so that nothing the command starts is outside.
func (t *tree) add(pid int) error {
	if t == nil {
		return nil
	}
	return os.WriteFile(filepath.Join(t.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// pids are the processes in the tree now.
func (t *tree) pids() []int {
	if t == nil {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(t.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// populated says whether any process is left in the tree.
func (t *tree) populated() bool {
	if t == nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(t.dir, "cgroup.events"))
	if err != nil {
		return len(t.pids()) > 0
	}
	return bytes.Contains(b, []byte("populated 1"))
}

// signal sends sig to every process in the tree.
func (t *tree) signal(sig syscall.Signal) {
	for _, pid := range t.pids() {
		_ = syscall.Kill(pid, sig)
	}
}

// kill ends every process in the tree: cgroup.kill (Linux 5.14 on) does it
// at once, including processes forked meanwhile; before that, SIGKILL to
// each process, repeated until none is left.
func (t *tree) kill() {
	if t == nil {
		return
	}
	if os.WriteFile(filepath.Join(t.dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for i := 0; i < 100 && t.populated(); i++ {
		t.signal(syscall.SIGKILL)
		time.Sleep(10 * time.Millisecond)
	}
}

// remove kills what is left and removes the cgroup, waiting (bounded) for
// the killed processes to leave it.
func (t *tree) remove() {
	if t == nil {
		return
	}
	t.kill()
	for i := 0; i < 200; i++ {
		if err := os.Remove(t.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
