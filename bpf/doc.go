// Package bpf holds cacheheat's BPF programs (cacheheat.c) and their
// bpf2go bindings: counter attribution at context switch, stack sampling
// and run-queue/off-CPU latency histograms. Only package collector loads
// them.
//
// vmlinux.h is generated from the build host's kernel BTF with
// `bpftool btf dump file /sys/kernel/btf/vmlinux format c`; the programs
// use CO-RE and tp_btf, so the object runs on other kernels with BTF.
package bpf
