package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/xcloak/xcloak/internal/cli"
)

const usage = `usage: stuffing <command> [flags]

stuffing simulates credential stuffing against XCloak, on this machine only
unless told otherwise, and reports what got through.

Commands:
  limiter   bursts at the seed's limiter and at XCloak's: admitted vs the limit
  http      attacks a running XCloak over HTTP like a botnet, beside a real user
  legit-compare
            a returning user's sign-ins with and without a flood of rejections,
            round by round: p99s and median ratios
  distributed
            a botnet's leaked list, each address used twice, against a running
            XCloak: takeovers, attack mode, returning and new-device users
  limiter-compare
            XCloak's limiter, redis_rate and a trivial script, round by round:
            decisions/s and median ratios
  script-compare
            versions of the limiter's script, round by round: their time
            inside Redis per call and Redis' CPU per decision
  memory    Redis memory per tracked attacker address at the default limit
  hello     serves a bare Go handler, the HTTP ceiling to compare with
  compare   wrk against XCloak's rejections, forward-auth and decision API and
            a bare Go handler, round by round: answers/s, p99, median ratios
  plot      draws "limiter --json" results as an SVG

Run "stuffing <command> --help" for the flags of a command.
`

// run is the whole program behind main, with its dependencies passed in so
// tests can call it: args includes the program name. Errors are written to
// stderr as well as returned.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprintf(stderr, "stuffing: no command given\n\n%s", usage)
		return cli.UsageError{Err: errors.New("no command given")}
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
	case "distributed":
		err = distributedCommand(ctx, rest, stdout, stderr)
	case "limiter-compare":
		err = limiterCompareCommand(ctx, rest, stdout, stderr)
	case "legit-compare":
		err = legitCompareCommand(ctx, rest, stdout, stderr)
	case "script-compare":
		err = scriptCompareCommand(ctx, rest, stdout, stderr)
	case "memory":
		err = memoryCommand(ctx, rest, stdout, stderr)
	case "hello":
		err = helloCommand(ctx, rest, stdout, stderr)
	case "compare":
		err = compareCommand(ctx, rest, stdout, stderr)
	case "plot":
		err = plotCommand(ctx, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "stuffing: unknown command %q\n\n%s", command, usage)
		return cli.UsageError{Err: fmt.Errorf("unknown command %q", command)}
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil && !errors.As(err, new(cli.UsageError)) {
		fmt.Fprintf(stderr, "stuffing %s: %v\n", command, err)
	}
	return err
}

// badFlag reports a flag value out of its bounds as a usage error.
func badFlag(stderr io.Writer, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	fmt.Fprintf(stderr, "stuffing: %v\n", err)
	return cli.UsageError{Err: err}
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
// writeJSON prints a run's report as indented JSON: what --json asks of
// every command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

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
