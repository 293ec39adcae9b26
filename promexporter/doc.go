// Package promexporter (the Prometheus exporter; export/ writes files)
// serves cacheheat's counts as Prometheus metrics: per
// CPU and node, per cgroup v2 (and the container or pod it belongs to),
// with run-queue and off-CPU latency histograms per cgroup and the
// exporter's own cost. It is a sink of the collector's recorder, which runs
// in its by-cgroup mode without a recording file; the metric names are a
// contract for dashboards and alerts (docs/EXPORTER.md).
package promexporter
