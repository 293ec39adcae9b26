// Package model derives what a recording says, once: totals per event,
// CPU and node, per-process totals, the per-window series behind the
// heatmaps, latency histograms with their percentiles, stack-sample
// aggregates, sampling rates, drops and the inspect summary. It is built
// by streaming the recording's windows (profile.Stream) and keeps only
// these reductions, not the windows' raw per-CPU arrays, so a view of a
// long, wide recording does not hold the recording in memory. The report
// (heatmap/), the live view (web/) and the CLI (inspect) render a Model;
// profile/ keeps the file and the raw data model.
package model
