package outfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotRegular is wrapped when an output path exists and is not a regular
// file, or its directory does not exist: the user named the wrong path.
var ErrNotRegular = errors.New("output path is not a regular file")

// ErrWrite is wrapped when the output could not be written: disk full,
// permission, a failed rename or a failed render.
var ErrWrite = errors.New("output not written")

// OldSuffix is appended to an existing output file that a new one replaces.
const OldSuffix = ".old"

// Mode is the permission of every output file.
const Mode = 0o644

// Check refuses path when it exists and is not a regular file (or a symlink
// to one), or when its directory does not exist. Commands call it before
// any work starts, so that a long recording does not end in a refusal.
func Check(path string) error {
	if path == "" {
		return fmt.Errorf("%w: empty path", ErrNotRegular)
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s is %s; cacheheat only replaces regular files", ErrNotRegular, path, Kind(fi.Mode()))
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		// A dangling symlink is replaced (renamed to FILE.old), never
		// followed; a missing directory is the user's mistake.
	default:
		return fmt.Errorf("%w: %s: %w", ErrNotRegular, path, err)
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: directory of %s: %w", ErrNotRegular, path, err)
	}
	if !di.IsDir() {
		return fmt.Errorf("%w: %s is %s, not a directory", ErrNotRegular, dir, Kind(di.Mode()))
	}
	return nil
}

// Kind names a file mode's type for messages: "a directory", "a character
// device", ...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// File is an output being written under a temporary name beside its final
// path. Commit moves it into place; Discard removes it.
type File struct {
	*os.File
	path string
}

// Create checks path and creates the temporary file for it in the same
// directory, named FILE.<random><suffix> (suffix such as ".partial" says
// what it is to someone who finds it after a crash).
func Create(path, suffix string) (*File, error) {
	if err := Check(path); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*"+suffix)
	if err != nil {
		return nil, fmt.Errorf("%w: creating a temporary file for %s: %w", ErrWrite, path, err)
	}
	if err := f.Chmod(Mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("%w: %s: %w", ErrWrite, f.Name(), err)
	}
	return &File{File: f, path: path}, nil
}

// Path is the final name.
func (f *File) Path() string { return f.path }

// TempPath is where the data is until Commit.
func (f *File) TempPath() string { return f.File.Name() }

// Commit syncs and closes the file, keeps an existing regular file at the
// final path as FILE.old and renames the file into place. When the final
// path has become something other than a regular file meanwhile, nothing is
// replaced and the error names the temporary file, which is kept. A failed
// sync or close (disk full) leaves the temporary file as it is too: for a
// recording, what was written may still be worth reading.
func (f *File) Commit() error {
	tmp := f.TempPath()
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("%w: syncing %s: %w", ErrWrite, tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: closing %s: %w", ErrWrite, tmp, err)
	}
	if err := Check(f.path); err != nil {
		return fmt.Errorf("%w (the output is kept in %s)", err, tmp)
	}
	if _, err := os.Lstat(f.path); err == nil {
		// rename(2) replaces a symlink at FILE.old itself, never its target.
		if err := os.Rename(f.path, f.path+OldSuffix); err != nil {
			return fmt.Errorf("%w: keeping the existing %s as %s: %w (the output is kept in %s)", ErrWrite, f.path, f.path+OldSuffix, err, tmp)
		}
	}
	if err := os.Rename(tmp, f.path); err != nil {
		return fmt.Errorf("%w: moving %s into place: %w (the output is kept in %s)", ErrWrite, f.path, err, tmp)
	}
	return nil
}

// Discard closes and removes the temporary file.
func (f *File) Discard() {
	f.Close()
	os.Remove(f.TempPath())
}

// Write renders an output into a temporary file and commits it. A failed
// render leaves nothing behind: neither half a file nor a changed FILE.
func Write(path string, render func(io.Writer) error) error {
	f, err := Create(path, ".tmp")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := render(bw); err != nil {
		f.Discard()
		return fmt.Errorf("%w: %s: %w", ErrWrite, path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Discard()
		return fmt.Errorf("%w: %s: %w", ErrWrite, path, err)
	}
	return f.Commit()
}
