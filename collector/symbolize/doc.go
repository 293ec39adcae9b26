// Package symbolize turns sampled stack addresses into function names at
// record time, so a recording needs nothing from the host it was made on.
//
// User-space addresses are resolved through a snapshot of the process's
// executable mappings (/proc/PID/maps), taken while the process is alive:
// each mapped ELF file is indexed once per file identity (device, inode,
// modification time, size) and its table is shared by every process that
// maps it, so a process that exits during the recording is still
// symbolized. A file is resolved through Go's .gopclntab first (it survives
// strip, so stripped Go binaries keep their function names), then .symtab,
// then .dynsym; only function symbols are kept. The vDSO is indexed from the
// recorder's own copy, which the kernel maps identically into every process.
// Anonymous executable mappings use the process's /tmp/perf-PID.map when a
// JIT writes one.
//
// Kernel addresses are resolved through /proc/kallsyms, loaded once on first
// use. Without root (or with kernel.kptr_restrict set) the kernel hides the
// addresses; KernelAvailable then says why and kernel frames carry only
// their raw address.
//
// What cannot be resolved keeps its module and module-relative offset, and
// profile.Frame.String shows it as module+0xoffset. Addresses are resolved
// exactly as given: callers pass return addresses from stacks unchanged, as
// perf does for symbol lookup (a call that is the last instruction of a
// function then resolves to the next function, which is rare and harmless
// for profiles).
package symbolize
