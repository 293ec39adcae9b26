// Package collector is cacheheat's only contact with the kernel's perf and
// BPF interfaces besides bpf/: it finds out what the host can measure
// (caps: privileges, PMU probes, the BPF load test), holds the event
// catalogue, probes and opens perf events, loads and attaches the BPF
// programs and drains their maps into the windows of a recording. It also
// resolves --func functions in their binaries (funcsym.go) and attaches
// the function probes (funclat.go). What the machine is (CPUs, nodes,
// caches, CPU model) comes from package host.
//
// Everything that reads sysfs or procfs takes a root directory ("/" in
// production) so the capability code is tested against package host's
// fixture trees (host/testdata/hosts) instead of the machine the tests
// run on.
package collector
