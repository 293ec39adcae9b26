// Package collector is cacheheat's only contact with the kernel besides
// bpf/: it reads the host's topology and capabilities, holds the event
// catalogue, probes and opens perf events, loads and attaches the BPF
// programs and drains their maps into the windows of a recording. It also
// resolves --func functions in their binaries (funcsym.go) and attaches
// the function probes (funclat.go).
//
// Everything that reads sysfs or procfs takes a root directory ("/" in
// production) so the topology and capability code is tested against fixture
// trees in testdata/hosts instead of the machine the tests run on.
package collector
