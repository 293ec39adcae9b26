// Command cacheheat profiles where programs lose time in the CPU cache
// hierarchy. main routes subcommands and turns errors into exit codes;
// each subcommand lives in its own file and registers itself in init.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// Exit codes (README.md, "Exit codes").
const (
	exitOK         = 0
	exitRegression = 1
	exitUsage      = 2
	exitHost       = 3
	exitFormat     = 4
	exitOutput     = 5
)

// command is one subcommand. run gets the arguments after the command name
// and writes its normal output to stdout.
type command struct {
	name    string
	summary string
	run     func(name string, args []string, stdout io.Writer) error
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return finish(c.run(c.name, []string{"--help"}, stdout), stderr)
			}
		}
		usage(stdout)
		return exitOK
	case "--version", "version":
		fmt.Fprintln(stdout, "cacheheat", Version)
		return exitOK
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "cacheheat: unknown command %q; run 'cacheheat --help' for the list of commands\n", name)
		return exitUsage
	}
	return finish(c.run(c.name, args[1:], stdout), stderr)
}

// finish prints err and maps it to an exit code. Only main does this.
func finish(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	code := exitCode(err)
	if code != exitRegression {
		// Errors can quote a recording's bytes.
		fmt.Fprintf(newTermWriter(stderr), "cacheheat: %v\n", err)
	}
	return code
}

// Version is set at build time by the Makefile.
var Version = "dev"

func usage(w io.Writer) {
	fmt.Fprint(w, `cacheheat shows where programs lose time in the CPU cache hierarchy.

Usage: cacheheat COMMAND [FLAGS] [ARGS]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Examples:
  cacheheat caps                                   what this host can measure
  cacheheat record -d 10s -o r.rec -- ./bench      record a command
  cacheheat record -p 1234 -d 30s -o r.rec         attach to a running process
  cacheheat report r.rec                           write r.html
  cacheheat diff base.rec new.rec                  exit 1 on a regression

Exit codes: 0 ok, 1 diff found a regression, 2 usage error,
3 the host cannot do it, 4 not a readable recording,
5 the output could not be written (disk full, rename or render failed).
Run 'cacheheat COMMAND --help' for a command's flags.
`)
}

// newFlagSet builds a command's FlagSet with a usage text that names the
// command, its arguments and examples.
func newFlagSet(name, synopsis, examples string, stdout io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: cacheheat %s %s\n\nFlags:\n%s", name, synopsis, fs.FlagUsages())
		if examples != "" {
			fmt.Fprintf(stdout, "\nExamples:\n%s", strings.TrimLeft(examples, "\n"))
		}
	}
	return fs
}

// parseFlags parses args and turns a flag error into a usage error with a
// one-line hint.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			// pflag has already printed the usage.
			return err
		}
		return usageErrorf("%s: %v; run 'cacheheat %s --help'", fs.Name(), err, fs.Name())
	}
	return nil
}
