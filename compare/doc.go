// Package compare derives per-window metrics from two recordings and tests
// whether NEW regressed against BASE.
//
// Every metric both recordings share (event rates for the target, per
// process by comm, per CPU and per NUMA node; miss ratios, MPKI and IPC;
// latency percentiles; the recorded command's own app metrics) becomes one
// sample per window on each side. The two samples are compared with a
// two-sided Mann-Whitney U test, the p-values are corrected for the number
// of metrics with Holm-Bonferroni, and the effect is the ratio of medians
// NEW/BASE with a bootstrap confidence interval. A metric regressed when its
// adjusted p-value is below alpha and its median moved beyond the threshold
// in the metric's "worse" direction (Direction).
//
// A Reducer derives one recording's metrics a window at a time, as a
// profile.Stream yields them, keeping per window only the metrics' values,
// so diff never holds a recording; Compare runs the same reducer over a
// recording in memory.
//
// Windows are treated as independent samples. They are not quite
// (a slow phase spans several windows), which makes the test somewhat
// optimistic; the effect threshold is the guard against that, and
// docs/CI.md says how to choose it.
package compare
