package collector

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// ErrNoTarget is wrapped when a target does not exist (a PID, a cgroup, a
// command): a usage error, exit 2.
var ErrNoTarget = errors.New("target not found")

// Target is what to record: profile.TargetPID with PIDs, TargetCgroup with
// Cgroup, TargetAll, or TargetCommand with Command.
type Target struct {
	Kind    string
	PIDs    []int
	Cgroup  string
	Command []string
}

// checkPIDs reports the first PID that does not name a live process.
func checkPIDs(pids []int) error {
	if len(pids) == 0 {
		return fmt.Errorf("%w: no pid given", ErrNoTarget)
	}
	for _, pid := range pids {
		if pid <= 0 || !alive(pid) {
			return fmt.Errorf("%w: no process with pid %d", ErrNoTarget, pid)
		}
	}
	return nil
}

// pidWatch follows the exits of target processes through pidfds, which
// poll readable once their process has exited (zombie or reaped) and name
// that process only, whatever later reuses its number. The runtime's
// poller waits on them, so the -p watcher wakes when a target exits, not
// ten times a second to read /proc/PID/stat: that polling was most of what
// a recorder of an idle process cost. Nonblocking pidfds need Linux 5.10;
// the BPF programs need 5.11.
type pidWatch struct {
	exits chan int
	done  chan struct{}
	files map[int]*os.File // processes watched, not yet seen to exit
	dead  map[int]bool
}

func newPIDWatch() *pidWatch {
	return &pidWatch{exits: make(chan int), done: make(chan struct{}), files: map[int]*os.File{}, dead: map[int]bool{}}
}

// alive says whether pid is running, watching it from the first time it
// is asked about. A pidfd that cannot be opened for another reason than
// the process being gone: /proc says.
func (w *pidWatch) alive(pid int) bool {
	if w.dead[pid] {
		return false
	}
	if _, ok := w.files[pid]; ok {
		return true
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			w.dead[pid] = true
			return false
		}
		return alive(pid)
	}
	if exitedNow(fd) {
		unix.Close(fd)
		w.dead[pid] = true
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	w.files[pid] = f
	go w.wait(pid, f)
	return true
}

// wait reports pid on exits once it exits (or the watch is closed).
func (w *pidWatch) wait(pid int, f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		// Read calls back, and between calls waits in the poller until
		// the pidfd is readable: the process has exited.
		_ = rc.Read(func(fd uintptr) bool { return exitedNow(int(fd)) })
	}
	select {
	case w.exits <- pid:
	case <-w.done:
	}
}

// exited marks pid as exited.
func (w *pidWatch) exited(pid int) {
	if f, ok := w.files[pid]; ok {
		f.Close()
		delete(w.files, pid)
	}
	w.dead[pid] = true
}

func (w *pidWatch) close() {
	close(w.done)
	for _, f := range w.files {
		f.Close()
	}
}

// exitedNow says whether a pidfd polls readable (its process has exited).
func exitedNow(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// alive says whether pid is a running process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the comm, which is in parentheses and may hold
	// spaces or parentheses itself.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	st := s[i+2]
	return st != 'Z' && st != 'X'
}

// cgroupPath resolves -G: an absolute path, or a path relative to the
// cgroup v2 mount (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid
// hosts).
func cgroupPath(g string) string {
	if filepath.IsAbs(g) {
		return filepath.Clean(g)
	}
	return filepath.Join(cgroup2Mount(), g)
}

// cgroup2Mount is where the cgroup v2 hierarchy is mounted.
func cgroup2Mount() string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[2] == "cgroup2" {
				return f[1]
			}
		}
	}
	return "/sys/fs/cgroup"
}

// cgroupLevel is a cgroup directory's depth below its cgroup v2 root (the
// root is 0): the number of parents that are on the same cgroup2 mount.
func cgroupLevel(p string) uint32 {
	var level uint32
	for dir := p; ; level++ {
		parent := filepath.Dir(dir)
		var fs syscall.Statfs_t
		if parent == dir || syscall.Statfs(parent, &fs) != nil || fs.Type != cgroup2Magic {
			return level
		}
		dir = parent
	}
}

const cgroup2Magic = 0x63677270 // CGROUP2_SUPER_MAGIC

// cgroupID is the cgroup v2 id of a cgroup directory: its inode number,
// which is what the kernel's kernfs node id is on 64-bit hosts.
func cgroupID(g string) (uint64, error) {
	p := cgroupPath(g)
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, fmt.Errorf("%w: cgroup %s: %w", ErrNoTarget, p, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return 0, fmt.Errorf("%w: cgroup %s is not a directory", ErrNoTarget, p)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(p, &fs); err == nil && fs.Type != cgroup2Magic {
		return 0, fmt.Errorf("%w: %s is not on a cgroup v2 file system (cgroup v2 is mounted at %s)", ErrNoTarget, p, cgroup2Mount())
	}
	return st.Ino, nil
}

// The command target is started through a gate: the recorder re-executes
// its own binary with gateEnv set; that child blocks on a pipe until the
// recorder has put its pid into the BPF target set, then execs the command.
// So the command's first instruction is already recorded, and the same pid
// is the command's. The gate itself runs in RunGate, which the binary (and
// the tests' TestMain) call before anything else.
const gateEnv = "CACHEHEAT_RECORD_GATE"

// gateFD is the pipe's read end in the gated child (ExtraFiles[0]).
const gateFD = 3

// RunGate returns at once unless this process is a gated command child
// or a recorder's reaper; then it waits for the recorder's go and execs
// the command (or cleans up after the recorder), never returning. A recorder that dies before saying go ends the child with
// status 127.
func RunGate() {
	if os.Getenv(reaperEnv) == "1" {
		runReaper(os.Stdin)
		os.Exit(0)
	}
	if os.Getenv(gateEnv) != "1" {
		return
	}
	os.Unsetenv(gateEnv)
	recorder := os.Getppid()
	f := os.NewFile(gateFD, "gate")
	var b [1]byte
	if n, _ := f.Read(b[:]); n != 1 {
		fmt.Fprintln(os.Stderr, "cacheheat: recorder exited before starting the command")
		os.Exit(127)
	}
	f.Close()
	if len(os.Args) < 3 {
		os.Exit(127)
	}
	if err := dropToSudoUser(); err != nil {
		fmt.Fprintf(os.Stderr, "cacheheat: %v\n", err)
		os.Exit(127)
	}
	// The command dies with the recorder, even of SIGKILL, rather than
	// run on unrecorded. Changing credentials cleared what the recorder
	// set at fork, so it is set again, and a recorder already gone by now
	// is seen in the parent pid.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil || os.Getppid() != recorder {
		os.Exit(127)
	}
	err := syscall.Exec(os.Args[1], os.Args[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "cacheheat: starting %s: %v\n", os.Args[1], err)
	os.Exit(127)
}

// command is a started, gated command target.
type command struct {
	cmd  *exec.Cmd
	gate *os.File
	done chan struct{}
	err  error
	// path is the binary the gate execs (cmd.Path is the gate's own).
	path string
	// tree is the cgroup the command runs in; nil where none could be
	// made, and then its process group is all that holds what it starts.
	tree *tree
	// released is when the gate let the command exec; exited when it
	// was waited for (both before done is closed).
	released, exited time.Time
	// gateCPUNS is the CPU time the gate had used when it was released:
	// its rusage, the command's after the exec, includes it.
	gateCPUNS int64
	// peakRSS is the largest VmHWM of the command's process read while it
	// ran (sampled: a lower bound of its peak).
	peakRSSKB int64
}

// startCommand starts argv behind the gate with env added to the
// environment. Under sudo the command runs as the invoking user.
func startCommand(argv []string, env []string, t *tree) (*command, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: empty command", ErrNoTarget)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("%w: command %q: %w", ErrNoTarget, argv[0], err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding cacheheat's own binary: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the command gate: %w", err)
	}
	c := exec.Command(self, append([]string{path}, argv...)...)
	c.Args[0] = "cacheheat-gate"
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.Env = append(append(os.Environ(), env...), gateEnv+"=1")
	c.ExtraFiles = []*os.File{r}
	// Its own process group, so that the command and everything it starts
	// (a shell's children) can be ended together: the target never
	// outlives the recorder (stop).
	// Pdeathsig: a recorder killed before the gate opens takes the gate
	// with it (the gate sets it again for the command).
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	r.Close()
	cm := &command{cmd: c, gate: w, done: make(chan struct{}), path: path, tree: t}
	go func() {
		cm.err = c.Wait()
		cm.exited = time.Now()
		close(cm.done)
	}()
	// Into its cgroup while it waits at the gate: everything the command
	// starts is then in it.
	if err := t.add(c.Process.Pid); err != nil {
		cm.kill()
		return nil, fmt.Errorf("putting %s in cgroup %s: %w", argv[0], t.dir, err)
	}
	return cm, nil
}

// release lets the gated command exec, once the gate waits at its pipe:
// the CPU time the gate took to start (Go's runtime, a few ms) is then
// known, and left out of the runs' CPU time (gateCPUNS).
func (c *command) release() error {
	defer c.gate.Close()
	c.gateCPUNS = gateCPU(c.cmd.Process.Pid)
	c.released = time.Now()
	if _, err := c.gate.Write([]byte{1}); err != nil {
		return fmt.Errorf("starting the command: %w", err)
	}
	return nil
}

// kill ends a command and everything it started at once (a command that
// never got past the gate, or a second Ctrl-C) and waits for the command.
func (c *command) kill() {
	c.gate.Close()
	c.killAll()
	<-c.done
}

// killAll sends SIGKILL to the command's process group and its cgroup.
func (c *command) killAll() {
	if c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	c.tree.kill()
}

// alive says whether any process of the command's group or cgroup is
// left.
func (c *command) alive() bool {
	return syscall.Kill(-c.cmd.Process.Pid, 0) == nil || c.tree.populated()
}

// stop ends the command and whatever it started, in its process group or
// (setsid or not) its cgroup: each gets SIGTERM and up to grace to exit,
// then SIGKILL. It returns once the command has been waited for and
// everything it started is gone (or after a bounded wait for processes
// stuck in the kernel).
func (c *command) stop(grace time.Duration) {
	if !c.alive() {
		<-c.done
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	c.tree.signal(syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && c.alive() {
		time.Sleep(20 * time.Millisecond)
	}
	if c.alive() {
		c.killAll()
	}
	<-c.done
	// The leader is reaped; the rest die of the SIGKILL as soon as they
	// leave the kernel, which is quick but not instant.
	for i := 0; i < 100 && c.alive(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// exitStatus is the command's exit status, 128+signal when a signal ended
// it, and the signal's name then ("" otherwise).
func (c *command) exitStatus() (int, string) {
	st := c.cmd.ProcessState
	if st == nil {
		return -1, ""
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	return st.ExitCode(), ""
}

// dropToSudoUser makes the gate the invoking user before it execs the
// command. The gate itself starts as root, so cacheheat's binary need not
// be executable by that user (it often lives in root's directories); only
// the command is run as them, with their group and no supplementary groups
// of root's. Go applies set*id calls to every thread of the process.
func dropToSudoUser() error {
	cred := sudoCredential()
	if cred == nil {
		return nil
	}
	if err := syscall.Setgroups([]int{int(cred.Gid)}); err != nil {
		return fmt.Errorf("dropping to the sudo user's groups: %w", err)
	}
	if err := syscall.Setresgid(int(cred.Gid), int(cred.Gid), int(cred.Gid)); err != nil {
		return fmt.Errorf("dropping to the sudo user's group %d: %w", cred.Gid, err)
	}
	if err := syscall.Setresuid(int(cred.Uid), int(cred.Uid), int(cred.Uid)); err != nil {
		return fmt.Errorf("dropping to the sudo user %d: %w", cred.Uid, err)
	}
	return nil
}

// sudoCredential is the invoking user's identity when run through sudo as
// root, so that a recorded command does not run as root.
func sudoCredential() *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, err1 := strconv.Atoi(os.Getenv("SUDO_UID"))
	gid, err2 := strconv.Atoi(os.Getenv("SUDO_GID"))
	if err1 != nil || err2 != nil || uid == 0 {
		return nil
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// targetHeader is the Target as written in the recording's header.
func (t Target) header() profile.Target {
	h := profile.Target{Kind: t.Kind, PIDs: t.PIDs, Cgroup: t.Cgroup, Command: t.Command}
	// A command's gate process has the affinity the command starts with.
	seen := map[int]bool{}
	for _, pid := range t.PIDs {
		for _, c := range allowedCPUs(pid) {
			if !seen[c] {
				seen[c] = true
				h.AllowedCPUs = append(h.AllowedCPUs, c)
			}
		}
	}
	sort.Ints(h.AllowedCPUs)
	return h
}

// allowedCPUs reads a process's CPU affinity from /proc; nil when it cannot.
func allowedCPUs(pid int) []int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			cpus, err := host.ParseCPUList(v)
			if err != nil {
				return nil
			}
			return cpus
		}
	}
	return nil
}

// gateCPU waits, up to a second, for the gate with this pid to block in
// its read of the gate pipe (read(2) on gateFD, /proc/PID/syscall), and
// returns the CPU time it has used (/proc/PID/schedstat, ns, all its
// threads' time is in the process's rusage); 0 when it cannot be read.
func gateCPU(pid int) int64 {
	want := fmt.Sprintf("0 0x%x ", gateFD) // read(2) on the pipe
	for i := 0; i < 1000; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
		if err != nil {
			return 0
		}
		if strings.HasPrefix(string(b), want) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var total int64
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += ns
		}
	}
	return total
}
