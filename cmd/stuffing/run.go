package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

const usage = `usage: stuffing <command> [flags]

stuffing simulates credential stuffing against XCloak, on this machine only
unless told otherwise, and reports what got through.

Commands:
  limiter   bursts at the seed's limiter and at XCloak's: admitted vs the limit
  http      attacks a running XCloak over HTTP like a botnet, beside a real user
  memory    Redis memory per tracked attacker address at the default limit
  hello     serves a bare Go handler, the HTTP ceiling to compare with
  plot      draws "limiter --json" results as an SVG

Run "stuffing <command> --help" for the flags of a command.
`

// usageError is a command line that could not be understood. Its message and
// the usage text are already on stderr; the process exits with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitCode maps the result of run to the process exit status.
func exitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		return 2
	default:
		return 1
	}
}

// run is the whole program behind main, with its dependencies passed in so
// tests can call it: args includes the program name. Errors are written to
// stderr as well as returned.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprintf(stderr, "stuffing: no command given\n\n%s", usage)
		return usageError{errors.New("no command given")}
	}
	command, rest := args[1], args[2:]

	var err error
	switch command {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "limiter":
		err = limiterCommand(ctx, rest, stdout, stderr)
	case "http":
		err = httpCommand(ctx, rest, stdout, stderr)
	case "memory":
		err = memoryCommand(ctx, rest, stdout, stderr)
	case "hello":
		err = helloCommand(ctx, rest, stdout, stderr)
	case "plot":
		err = plotCommand(ctx, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "stuffing: unknown command %q\n\n%s", command, usage)
		return usageError{fmt.Errorf("unknown command %q", command)}
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil && !errors.As(err, new(usageError)) {
		fmt.Fprintf(stderr, "stuffing %s: %v\n", command, err)
	}
	return err
}

// newFlagSet returns a flag set for a subcommand whose usage text starts with
// synopsis and description, followed by the flags.
func newFlagSet(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("stuffing "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: stuffing %s %s\n\n%s\nFlags:\n", name, synopsis, description)
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

// badFlag reports a flag value out of its bounds as a usage error.
func badFlag(stderr io.Writer, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	fmt.Fprintf(stderr, "stuffing: %v\n", err)
	return usageError{err}
}

// intList is a flag holding comma-separated positive integers.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return errors.New("want at least one number")
	}
	*l = out
	return nil
}

// stringList is a flag holding comma-separated strings.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	var out []string
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	*l = out
	return nil
}

// isTerminal reports whether w is a character device, so that a progress
// bar redrawn with \r is seen rather than written to a log.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// inBounds checks a duration flag against [lo, hi].
func inBounds(name string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return fmt.Errorf("--%s %s out of range %s..%s", name, d, lo, hi)
	}
	return nil
}
