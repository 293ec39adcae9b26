package bpf

// The generated cacheheat_bpfel.go and cacheheat_bpfel.o are committed so a
// plain `go build` needs no clang; `make generate` refreshes them.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type task_key -type task_val -type last_val -type totals_val -type stats_val -type hist_val -type sample_key -type offcpu_stat -type go_stack -type go_offsets -type other_key -type cgroup_val Cacheheat cacheheat.c -- -I.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type func_bucket -type func_stats -type func_event -type inflight_key Funclat funclat.c -- -I.
