package collector

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The reads a window makes (per-CPU map lookups, perf counter reads) are
// system calls that wait on no I/O and no other process; they are made
// raw, without telling the Go scheduler. A system call made the usual way
// wakes the runtime's sysmon thread when it sleeps (Go's entersyscall:
// sysmon must be ready to take the P back from a call that blocks), and
// once woken that way sysmon polls every 20 us for as long as the program
// keeps its P busy. An idle recorder's window is a few hundred
// microseconds of such reads: sysmon's polls were 8 of the recorder's 10
// wake-ups a second and a fifth of its time. Writing the window to the
// file still wakes sysmon, but at the window's end.

// rawRead is read(2) made raw, again when interrupted; only for a file
// whose reads do not wait: the call holds the P (with GOMAXPROCS 1, the
// only one) until it returns.
func rawRead(fd int, b []byte) (int, error) {
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(n), nil
	}
}
