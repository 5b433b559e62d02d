package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/xcloak/xcloak/internal/cli"
)

const usage = `usage: xcloak <command> [flags]

XCloak protects sign-in and password reset: every attempt passes per-IP and
per-account limits in Redis, and repeated failures lock accounts out.

Commands:
  serve        run the HTTP service (creates and migrates the database first)
  migrate      create the database if missing and apply schema migrations
  user         add accounts and end lockouts from the command line
  apikey       add, list and revoke the decision API's keys
  healthcheck  exit 0 when the server at XCLOAK_ADDR is ready (GET /readyz)
  version      print the version and build of this binary

Run "xcloak <command> --help" for the flags of a command.
`

// run is the whole program behind main, with its dependencies passed in so
// tests can call it: args includes the program name, environ is the
// environment as os.Environ lists it ("NAME=value"). Errors are written to
// stderr as well as returned.
func run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	getenv := lookupEnv(environ)
	if len(args) < 2 {
		fmt.Fprintf(stderr, "xcloak: no command given\n\n%s", usage)
		return cli.UsageError{Err: errors.New("no command given")}
	}
	command, rest := args[1], args[2:]

	switch command {
	case "serve", "migrate", "user", "apikey", "healthcheck": // the commands that take settings
		warnUnknownSettings(environ, stderr)
	}
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
	case "apikey":
		err = apikey(ctx, rest, getenv, stdout, stderr)
	case "healthcheck":
		err = healthcheck(ctx, rest, getenv, stdout, stderr)
	case "version":
		err = printVersion(ctx, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "xcloak: unknown command %q\n\n%s", command, usage)
		return cli.UsageError{Err: fmt.Errorf("unknown command %q", command)}
	}
	if err != nil && !errors.As(err, new(cli.UsageError)) {
		name := command
		if (command == "user" || command == "apikey") && len(rest) > 0 {
			name += " " + rest[0]
		}
		fmt.Fprintf(stderr, "xcloak %s: %v\n", name, err)
	}
	return err
}

// lookupEnv returns a getenv that reads environ, as os.Getenv reads the
// process's: the first of a name's entries counts, and a name not set
// reads as "".
func lookupEnv(environ []string) func(string) string {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if _, seen := vars[name]; ok && !seen {
			vars[name] = value
		}
	}
	return func(name string) string { return vars[name] }
}
