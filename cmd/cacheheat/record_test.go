package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// waitWindows waits until the recording being written at out has n
// complete windows.
func waitWindows(t *testing.T, out string, n int) {
	t.Helper()
	for i := 0; i < 300; i++ {
		for _, p := range profile.PartialFiles(out) {
			if rec, err := profile.ReadFile(p); err == nil && len(rec.Windows) >= n {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never reached %d windows", out, n)
}

// TestRecordSignals: one SIGINT finishes the recording (exit 0, trailer,
// end reason signal); two exit at once and still leave a readable file
// under the final name.
func TestRecordSignals(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	for _, twice := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "sig.rec")
		cmd := exec.Command(bin, "record", "-a", "-q", "-e", "cpu-clock,context-switches", "-i", "100ms", "-o", out)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		waitWindows(t, out, 3)
		cmd.Process.Signal(syscall.SIGINT)
		if twice {
			cmd.Process.Signal(syscall.SIGINT)
		}
		err := cmd.Wait()
		rec, rerr := profile.ReadFile(out)
		if rerr != nil {
			t.Fatalf("twice=%v: reading the recording: %v (stderr %s)", twice, rerr, stderr.String())
		}
		if len(rec.Windows) < 3 {
			t.Errorf("twice=%v: %d windows, want at least 3", twice, len(rec.Windows))
		}
		if !twice {
			if err != nil || rec.Trailer == nil || rec.Trailer.EndReason != profile.EndSignal {
				t.Errorf("one SIGINT: exit %v, trailer %+v; want exit 0 and end reason signal (stderr %s)", err, rec.Trailer, stderr.String())
			}
			continue
		}
		// The second signal may arrive after the first has already
		// finished the file; either way it must be readable and complete
		// up to its last window.
		if rec.Trailer == nil && (!rec.Truncated || cmd.ProcessState.ExitCode() != 130) {
			t.Errorf("two SIGINTs: exit %d, truncated %v; want 130 and a truncated file", cmd.ProcessState.ExitCode(), rec.Truncated)
		}
		if p := profile.PartialFiles(out); len(p) > 0 {
			t.Errorf("two SIGINTs left %s behind", p)
		}
	}
}

// TestRecordSudoUser: run through sudo, the recorded command runs as the
// invoking user (SUDO_UID/SUDO_GID), not as root.
func TestRecordSudoUser(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	// The command runs as another user: it needs a directory it can write.
	dir, err := os.MkdirTemp("", "cacheheat-sudo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	out, idFile := filepath.Join(dir, "sudo.rec"), filepath.Join(dir, "id")
	cmd := exec.Command(bin, "record", "-q", "-e", "cpu-clock", "-o", out, "--", "sh", "-c", "id -u > "+idFile+"; id -g >> "+idFile+"; id -G >> "+idFile)
	cmd.Env = append(os.Environ(), "SUDO_UID=65534", "SUDO_GID=65533")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, b)
	}
	got, err := os.ReadFile(idFile)
	if err != nil {
		t.Fatal(err)
	}
	// uid, gid, then the groups: only the user's own, none of root's.
	if ids := strings.Fields(string(got)); len(ids) != 3 || ids[0] != strconv.Itoa(65534) || ids[1] != strconv.Itoa(65533) || ids[2] != ids[1] {
		t.Errorf("command ran as uid, gid, groups %q, want 65534 65533 65533", ids)
	}
	rec, err := profile.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Trailer == nil || rec.Trailer.ExitStatus == nil || *rec.Trailer.ExitStatus != 0 {
		t.Errorf("trailer %+v, want the command's exit status 0", rec.Trailer)
	}
}
