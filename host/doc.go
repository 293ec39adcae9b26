// Package host describes the machine cacheheat runs on: its CPUs, SMT
// siblings, NUMA nodes and caches (sysfs, else CPUID on VMs that hide
// sysfs' cache directories), its CPU model (/proc/cpuinfo) and the
// kernel's CPU-list format. It only reads files and executes CPUID; it
// opens no perf event and loads no BPF, so the bundled workloads can size
// their data to the caches without linking the recorder (package
// collector, which adds the event catalogue, PMU probing and the BPF
// load test on top of this).
//
// Everything that reads sysfs or procfs takes a root directory ("/" in
// production), so the code is tested against fixture trees in
// testdata/hosts instead of the machine the tests run on.
package host
