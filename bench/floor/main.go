// Command floor measures what the kernel's BPF accounting charges for the
// cheapest possible sched_switch program (tp_btf, returns 0), the floor
// under which no on_switch can go on a host. It reads run_time_ns and
// run_cnt of its own program only, with statistics switched on through its
// own BPF_ENABLE_STATS file descriptor. Needs root.
//
// Usage: go run ./bench/floor [-s seconds]
package main

import (
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

func main() {
	secs := flag.Int("s", 10, "seconds to measure")
	flag.Parse()
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		log.Fatalf("enable stats: %v", err)
	}
	defer stats.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceRawTp,
		AttachTo:     "sched_switch",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		License:      "GPL",
	})
	if err != nil {
		log.Fatalf("load: %v", err)
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		log.Fatalf("attach: %v", err)
	}
	defer l.Close()
	s0, err := prog.Stats()
	if err != nil {
		log.Fatalf("stats: %v", err)
	}
	time.Sleep(time.Duration(*secs) * time.Second)
	s1, err := prog.Stats()
	if err != nil {
		log.Fatalf("stats: %v", err)
	}
	runs := s1.RunCount - s0.RunCount
	ns := s1.Runtime - s0.Runtime
	if runs == 0 {
		log.Fatal("no sched_switch in the interval: cannot decide")
	}
	fmt.Printf("empty tp_btf/sched_switch: %d runs in %d s (%.0f/s), %.0f ns/run\n",
		runs, *secs, float64(runs)/float64(*secs), float64(ns)/float64(runs))
}
