package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

const usage = `usage: xcloak <command> [flags]

XCloak protects sign-in and password reset: every attempt passes per-IP and
per-account limits in Redis, and repeated failures lock accounts out.

Commands:
  serve     run the HTTP service (creates and migrates the database first)
  migrate   create the database if missing and apply schema migrations
  user      add accounts and end lockouts from the command line

Run "xcloak <command> --help" for the flags of a command.
`

// usageError is a command line that could not be understood. Its message and
// the usage text are already on stderr; the process exits with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitCode maps the result of run to the process exit status.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.As(err, new(usageError)):
		return 2
	default:
		return 1
	}
}

// run is the whole program behind main, with its dependencies passed in so
// tests can call it: args includes the program name, getenv reads the
// environment. Errors are written to stderr as well as returned.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprintf(stderr, "xcloak: no command given\n\n%s", usage)
		return usageError{errors.New("no command given")}
	}
	command, rest := args[1], args[2:]

	var err error
	switch command {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "serve":
		err = serve(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		err = migrate(ctx, rest, getenv, stdout, stderr)
	case "user":
		err = user(ctx, rest, getenv, stdin, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "xcloak: unknown command %q\n\n%s", command, usage)
		return usageError{fmt.Errorf("unknown command %q", command)}
	}
	if err != nil && !errors.As(err, new(usageError)) {
		name := command
		if command == "user" && len(rest) > 0 {
			name += " " + rest[0]
		}
		fmt.Fprintf(stderr, "xcloak %s: %v\n", name, err)
	}
	return err
}

// newFlagSet returns a flag set for a subcommand whose usage text starts with
// synopsis and description, followed by the flags.
func newFlagSet(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("xcloak "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: xcloak %s %s\n\n%s\nFlags:\n", name, synopsis, description)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args with fs. Help goes to stdout and returns flag.ErrHelp;
// a bad flag or a stray argument goes to stderr with the usage and returns a
// usageError.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(out.Bytes())
		return flag.ErrHelp
	case err != nil:
		_, _ = stderr.Write(out.Bytes())
		return usageError{err}
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.SetOutput(stderr)
		fs.Usage()
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
