// Package symbolize turns sampled stack addresses into function names at
// record time, so a recording needs nothing from the host it was made on.
//
// User-space addresses are resolved through a snapshot of the process's
// executable mappings (/proc/PID/maps), taken while the process is alive:
// each mapped ELF file is indexed once per file identity (device, inode,
// modification time, size) and its table is shared by every process that
// maps it, so a process that exits during the recording is still
// symbolized. Indexing waits until an address in the file is first
// resolved (most files a process maps are never sampled); the file is kept
// open until then, at most 512 of them, past which files are indexed when
// seen. NeedsSnapshot says when a process's mappings must be read again. A file is resolved through Go's .gopclntab first (it survives
// strip, so stripped Go binaries keep their function names), then .symtab,
// then .dynsym; only function symbols are kept. A file without .symtab is
// completed from its separate debug file (/usr/lib/debug/.build-id/xx/rest.debug,
// what -dbgsym packages install) when one is installed. The vDSO is indexed from the
// recorder's own copy, which the kernel maps identically into every process.
// Anonymous executable mappings use the process's /tmp/perf-PID.map when a
// JIT writes one.
//
// Kernel addresses are resolved through /proc/kallsyms, loaded once on first
// use. Without root (or with kernel.kptr_restrict set) the kernel hides the
// addresses; KernelAvailable then says why and kernel frames carry only
// their raw address.
//
// Every frame keeps its module and an offset, and what cannot be resolved
// is shown by profile.Frame.String as module+0xoffset. The offset is the
// file offset for a mapped file (what readelf's program headers map to a
// link-time address), the absolute address for anonymous memory and
// "[unknown]", relative to _text for "[kernel]" (so it survives KASLR) and
// to the module's lowest symbol for a kernel module.
//
// A snapshot describes the process that had the pid when it was taken: if a
// pid is reused, the next Snapshot replaces it, so a recorder resolves a
// window's stacks before it snapshots the pids of the next one. Addresses are resolved
// exactly as given: callers pass return addresses from stacks unchanged, as
// perf does for symbol lookup (a call that is the last instruction of a
// function then resolves to the next function, which is rare and harmless
// for profiles).
package symbolize
