// Package outfile writes a command's output file without harming whatever
// already lives at its path. Every cacheheat command that writes a file
// (record, report -o, diff -o, diff --markdown, and any later one) goes
// through it, so the rules below hold everywhere:
//
//   - A path that exists and is not a regular file (a device node such as
//     /dev/null, a FIFO, a socket, a directory) is refused before any work
//     starts, with ErrNotRegular: cacheheat runs as root, and replacing
//     /dev/null with a recording would damage the host.
//   - An existing regular file is kept as FILE.old, as perf does, and only
//     then replaced.
//   - Data is written to a temporary file in the output's directory, created
//     by os.CreateTemp (an unpredictable name opened with O_CREAT|O_EXCL), and
//     renamed into place at the end. A symlink planted at a predictable name
//     such as FILE.partial or FILE.tmp is never opened, so its target is
//     never written.
//   - Failures to write, sync or rename wrap ErrWrite, which the command
//     line maps to its own exit code (not "usage error").
package outfile
