// Package workloads holds the bundled "O3" workloads: small programs, each
// with a bad and a good variant of one well-known cache effect (false
// sharing, misaligned records, untiled GEMM, strided KV-cache reads, lock
// contention), plus the pointer-chase staircase, STREAM bandwidth and NUMA
// placement. They generate load for cacheheat to record and compute a result
// that is checked, so a variant is only "fast" if it is also right.
//
// The workload table (All, Lookup) is data: name, what it shows, variants,
// parameters and a run function, one file per workload. Run validates a
// Config, names the worker threads o3-NAME (so a profile shows them),
// reports progress to an optional metrics file and returns a Result.
//
// An op is the workload's unit of work (one counter add, one record update,
// one multiply-add, one key/value position of one head, one read of the
// shared config, one pointer load, one array element). ops_per_sec is ops
// over wall time; ns_per_op is time per op per thread (threads x elapsed /
// ops), the latency one thread sees.
package workloads
