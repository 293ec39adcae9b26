package collector

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// A recorder killed with SIGKILL runs no cleanup of its own: its command's
// gate dies with it (PR_SET_PDEATHSIG), but what the command started, the
// command's cgroup and the metrics file would stay. The reaper is a small
// process of cacheheat's own binary, in a session of its own (so Ctrl-C at
// the terminal does not reach it), that the recorder tells what to clean
// up, one line at a time over a pipe: "pgid N" (the running command's
// process group, 0 when none runs), "cgroup DIR", "file PATH", and
// "done" once the recorder has cleaned up itself. When the pipe closes
// without "done" (the recorder died, however), the reaper kills the
// process group and the cgroup, removes the cgroup and the file, and
// exits.

// reaperEnv marks the reaper process (see RunGate).
const reaperEnv = "CACHEHEAT_RECORD_REAPER"

// reaper is the recorder's end of the pipe to its reaper process.
type reaper struct {
	w   *os.File
	cmd *exec.Cmd
}

// startReaper starts the reaper process; nil (and the error) when it
// cannot, and the recording then goes on without it.
func startReaper() (*reaper, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	c := exec.Command(self)
	c.Args[0] = "cacheheat-reaper"
	c.Env = append(os.Environ(), reaperEnv+"=1")
	c.Stdin = r
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the cleanup process: %w", err)
	}
	return &reaper{w: w, cmd: c}, nil
}

// tell sends one line to the reaper.
func (rp *reaper) tell(key string, value string) {
	if rp == nil {
		return
	}
	fmt.Fprintf(rp.w, "%s %s\n", key, value)
}

// done tells the reaper that everything is cleaned up, and waits for it.
func (rp *reaper) done() {
	if rp == nil {
		return
	}
	fmt.Fprintln(rp.w, "done")
	rp.w.Close()
	_ = rp.cmd.Wait()
}

// runReaper is the reaper process: it reads its instructions until the
// pipe closes, then cleans up unless told "done".
func runReaper(in io.Reader) {
	var pgid int
	var cgroup, file string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		key, value, _ := strings.Cut(sc.Text(), " ")
		switch key {
		case "pgid":
			pgid, _ = strconv.Atoi(value)
		case "cgroup":
			cgroup = value
		case "file":
			file = value
		case "done":
			return
		}
	}
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if cgroup != "" {
		(&tree{dir: cgroup}).remove()
	}
	if file != "" {
		os.Remove(file)
	}
}
