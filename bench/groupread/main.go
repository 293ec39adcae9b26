// Command groupread times what reading one CPU's group of software
// counters costs the reader, with the reader pinned to CPU 0: a group on
// CPU 0 (its own) and on CPU 1 (another: the kernel interrupts that CPU
// to read it, and an idle one is woken), against the same loop without a
// read. Each read is followed by a 1 ms sleep, so that the other CPU is
// idle when read, as a recorder's window finds most CPUs of an idle host.
// The collector reads another CPU's group only after a page fault there
// (collector/kernel_maps.go, readCounters).
//
//	go run ./bench/groupread [READS]    (default 3000; root, 2+ CPUs)
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

func open(config uint64, cpu, group int) (int, error) {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: config}
	attr.Size = uint32(unix.PERF_ATTR_SIZE_VER7)
	attr.Read_format = unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING | unix.PERF_FORMAT_GROUP
	return unix.PerfEventOpen(&attr, -1, cpu, group, unix.PERF_FLAG_FD_CLOEXEC)
}

// group opens cpu-clock, context-switches, page-faults and cpu-migrations
// on cpu, one group led by the first, as the collector does.
func group(cpu int) (int, error) {
	lead, err := open(unix.PERF_COUNT_SW_CPU_CLOCK, cpu, -1)
	if err != nil {
		return -1, err
	}
	for _, c := range []uint64{unix.PERF_COUNT_SW_CONTEXT_SWITCHES, unix.PERF_COUNT_SW_PAGE_FAULTS, unix.PERF_COUNT_SW_CPU_MIGRATIONS} {
		if _, err := open(c, cpu, lead); err != nil {
			return -1, err
		}
	}
	return lead, nil
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func main() {
	n := 3000
	if len(os.Args) > 1 {
		var err error
		if n, err = strconv.Atoi(os.Args[1]); err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "usage: groupread [READS]")
			os.Exit(2)
		}
	}
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(0)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		fmt.Fprintln(os.Stderr, "groupread:", err)
		os.Exit(1)
	}
	buf := make([]byte, 256)
	// Twice each, alternated, so that drift on a shared host shows.
	for _, cpu := range []int{-1, 0, 1, -1, 0, 1} {
		fd := -1
		name := "no read"
		if cpu >= 0 {
			var err error
			if fd, err = group(cpu); err != nil {
				fmt.Fprintln(os.Stderr, "groupread:", err)
				os.Exit(1)
			}
			name = fmt.Sprintf("group of cpu %d", cpu)
		}
		t0 := threadCPU()
		for range n {
			if fd >= 0 {
				if _, err := unix.Read(fd, buf); err != nil {
					fmt.Fprintln(os.Stderr, "groupread:", err)
					os.Exit(1)
				}
			}
			time.Sleep(time.Millisecond)
		}
		d := threadCPU() - t0
		fmt.Printf("%-15s %d loops, reader's CPU %.2f us a loop\n", name, n, float64(d.Nanoseconds())/1e3/float64(n))
		if fd >= 0 {
			unix.Close(fd) // the members close with the process
		}
	}
}
