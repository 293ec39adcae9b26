// Package bpf holds cacheheat's BPF programs and their bpf2go bindings:
// cacheheat.c does counter attribution at context switch, stack sampling
// and run-queue/off-CPU latency histograms; funclat.c times --func
// functions' calls with the calling task's counters per call (sizes shared
// with user space in funclat.h). Only package collector loads them.
//
// cacheheat.h is the contract between cacheheat.c and collector: sizes,
// target modes, slot numbers and off-CPU reasons as C enums, which bpf2go
// exports to Go with -type (CacheheatMode, CacheheatSizes, ...), so
// collector uses the generated constants and never a copy;
// contract_test.go fails when the header, the object and the Go disagree.
// Kernel constants come from the kernel: errno names from its UAPI headers,
// struct layouts through CO-RE; the task state bits are macros, which
// neither BTF nor CO-RE can reach, and are written out in cacheheat.c with
// the kernel versions they hold for.
//
// vmlinux.h is generated from the build host's kernel BTF with
// `bpftool btf dump file /sys/kernel/btf/vmlinux format c`; the programs
// use CO-RE and tp_btf, so the object runs on other kernels with BTF.
package bpf
