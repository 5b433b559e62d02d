// Package cli is what XCloak's commands (xcloak, stuffing) share for their
// subcommands: flag sets with a usage text, parsing that sends help to
// stdout and mistakes to stderr, and exit codes.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// UsageError is a mistake in how a command was called (unknown command,
// bad flag, stray argument); the command exits with status 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ExitCode is the process status for what a command returned: 0 for
// success or help, 2 for a UsageError, 1 for any other error.
func ExitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(UsageError)):
		return 2
	default:
		return 1
	}
}

// NewFlagSet returns a flag set for subcommand name of program whose usage
// text starts with synopsis and description, followed by the flags.
func NewFlagSet(program, name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(program+" "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s %s %s\n\n%s\nFlags:\n", program, name, synopsis, description)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args with fs. Help goes to stdout and returns flag.ErrHelp;
// a bad flag or a stray argument goes to stderr with the usage and returns
// a UsageError.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(out.Bytes())
		return flag.ErrHelp
	case err != nil:
		_, _ = stderr.Write(out.Bytes())
		return UsageError{Err: err}
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.SetOutput(stderr)
		fs.Usage()
		return UsageError{Err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
