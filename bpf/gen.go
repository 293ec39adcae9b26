package bpf

// The generated cacheheat_bpfel.go and cacheheat_bpfel.o are committed so a
// plain `go build` needs no clang; `make generate` refreshes them.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type task_key -type task_val -type last_val -type totals_val -type stats_val -type hist_val -type sample_rec -type stack_rec -type offcpu_stat -type go_stack -type go_offsets -type other_key -type cgroup_val -type sizes -type mode -type target_state -type slot_source -type sample_slot -type offcpu_reason -type wait_bits -type fd_kind -type wait_val -type peer_key -type peer_val Cacheheat cacheheat.c -- -I.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type func_bucket -type func_stats -type func_event -type inflight_key -type func_size -type cookie_bits -type func_counter Funclat funclat.c -- -I.
