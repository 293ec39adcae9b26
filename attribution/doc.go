// Package attribution turns a recording into root-cause findings: it derives
// metrics (rates, ratios such as miss ratio and MPKI, per-core imbalance,
// per-window latency percentiles) and evaluates a table of rules against
// them.
//
// Metrics are reductions, built one window at a time by a Builder as a
// stream reads the file, so a long recording is analysed without being
// held in memory; Analyze runs the same Builder over a recording that is.
//
// The rule table (Rules) is data: each rule names the inputs it needs, its
// thresholds, where they come from and what to do. A rule whose inputs were
// not measured is never skipped and never guessed: Analyze lists it as not
// evaluated, with the reason the recording gives (for example "unsupported
// on this host: no hardware PMU"). docs/ATTRIBUTION.md is generated from the
// same table, so the documentation cannot drift from the code.
//
// Metrics are called by their one name from package metric (the derived
// metrics and event names) or, for a rule's own vocabulary, names.go.
// Finding is the one shape of a finding: the CLI, the report and the live
// view render it.
package attribution
