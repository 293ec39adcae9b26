// Package bpf holds cacheheat's BPF programs and their bpf2go bindings:
// cacheheat.c does counter attribution at context switch, stack sampling
// and run-queue/off-CPU latency histograms; funclat.c times --func
// functions' calls with the calling task's counters per call (sizes shared
// with user space in funclat.h). Only package collector loads them.
//
// vmlinux.h is generated from the build host's kernel BTF with
// `bpftool btf dump file /sys/kernel/btf/vmlinux format c`; the programs
// use CO-RE and tp_btf, so the object runs on other kernels with BTF.
package bpf
