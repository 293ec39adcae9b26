package main

import (
	"errors"
	"fmt"

	"github.com/cacheheat/cacheheat/internal/outfile"
	"github.com/cacheheat/cacheheat/profile"
)

// usageError marks bad input from the user: exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// hostError marks something this host cannot do: exit 3.
type hostError struct{ err error }

func (e *hostError) Error() string { return e.err.Error() }
func (e *hostError) Unwrap() error { return e.err }

// errRegression is returned by diff when a metric regressed: exit 1.
var errRegression = errors.New("regression found")

// exitCode maps an error to the exit codes the README lists. Packages below cmd
// mark their errors with sentinels (errorClassifiers, one per package that
// has them), so only this file knows the numbers.
func exitCode(err error) int {
	var ue *usageError
	var he *hostError
	switch {
	case errors.Is(err, errRegression):
		return exitRegression
	case errors.Is(err, errRunFailed):
		// The command failed on a run: the job fails as the command
		// would, with the runs before it recorded.
		return exitRegression
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &he):
		return exitHost
	case errors.Is(err, profile.ErrFormat):
		return exitFormat
	case errors.Is(err, outfile.ErrNotRegular):
		// The user named a device, a directory or a missing directory.
		return exitUsage
	case errors.Is(err, outfile.ErrWrite):
		// Disk full, a failed rename or render: not the user's mistake.
		return exitOutput
	}
	for _, c := range errorClassifiers {
		if code, ok := c(err); ok {
			return code
		}
	}
	return exitUsage
}

// errorClassifiers let a command file map its package's sentinels to exit
// codes without editing this file.
var errorClassifiers []func(error) (int, bool)
