package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/cli"
)

const userUsage = `usage: xcloak user <command> [flags]

Manages accounts directly in Postgres and Redis; the server need not run.
The database is created and migrated first, as serve does.

Commands:
  add      create an account; the password is read from stdin
  list     list accounts by email, a page at a time (--search, --json)
  disable  stop an account signing in; its sign-ins fail as a wrong password
  enable   let a disabled account sign in again
  delete   delete an account (--yes); its security events stay
  promote  make an account an administrator
  demote   make an administrator a member (never the last one)
  unlock   end an account's lockout and its second step's, and forget
           their failures
  signout  end every session of an account and forget its known devices
           ("sign-out" is the same command)
  remove-factors
           remove an account's second factors and recovery codes, for an
           owner who lost them (the last administrator's too)

Run "xcloak user <command> --help" for the flags of a command.
`

// user runs the account commands.
func user(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "xcloak user: no command given\n\n%s", userUsage)
		return cli.UsageError{Err: errors.New("no user command given")}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, userUsage)
		return nil
	case "add":
		return userAdd(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "unlock":
		return userUnlock(ctx, args[1:], getenv, stdout, stderr)
	case "signout", "sign-out":
		return userSignOut(ctx, args[0], args[1:], getenv, stdout, stderr)
	case "remove-factors":
		return userRemoveFactors(ctx, args[1:], getenv, stdout, stderr)
	case "list":
		return userList(ctx, args[1:], getenv, stdout, stderr)
	case "disable":
		return userAdminCommand(ctx, userDisableAction, args[1:], getenv, stdout, stderr)
	case "enable":
		return userAdminCommand(ctx, userEnableAction, args[1:], getenv, stdout, stderr)
	case "promote":
		return userAdminCommand(ctx, userPromoteAction, args[1:], getenv, stdout, stderr)
	case "demote":
		return userAdminCommand(ctx, userDemoteAction, args[1:], getenv, stdout, stderr)
	case "delete":
		return userDelete(ctx, args[1:], getenv, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "xcloak user: unknown command %q\n\n%s", args[0], userUsage)
		return cli.UsageError{Err: fmt.Errorf("unknown user command %q", args[0])}
	}
}

func userAdd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("xcloak", "user add", "--email ADDRESS [--admin] [flags] < password-file",
		"Creates an account. The password is the first line of stdin, without its\n"+
			"line ending; it needs at least 8 characters, and is refused if it is in\n"+
			"the breach corpus XCLOAK_BREACHED_PASSWORDS names, holds a NUL byte or\n"+
			"bytes that are not UTF-8, or still ends in \\r. The account is recorded\n"+
			"as a security event (user_created) by \"cli\". For example:\n\n"+
			"  printf '%s\\n' \"$PASSWORD\" | xcloak user add --email ann@example.com --admin\n")
	email := fs.String("email", "", "mail `address` of the new account (required)")
	admin := fs.Bool("admin", false, "make the account an administrator")
	cfg, err := loadConfig(fs, args, getenv, stdout, stderr, forUser|forUserAdd)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	addr, err := requireEmail(fs, *email, stderr)
	if err != nil {
		return err
	}
	// Refused before the password is asked for, not after it is hashed.
	if _, err := auth.NewAccountEmail(addr); err != nil {
		return fmt.Errorf("--email %q is not a mail address", *email)
	}
	password, err := promptPassword(ctx, stdin, stderr, addr)
	if err != nil {
		return err
	}

	b, err := openUserBackend(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	u, err := b.svc.CreateUser(ctx, addr, password, *admin, "cli")
	switch {
	case errors.Is(err, auth.ErrUserExists):
		return fmt.Errorf("a user with email %s exists already", addr)
	case errors.Is(err, auth.ErrWeakPassword):
		return fmt.Errorf("password refused: %s", strings.TrimPrefix(err.Error(), "auth: "))
	case errors.Is(err, auth.ErrBreachedPassword):
		return errors.New("password refused: it has appeared in a data breach (XCLOAK_BREACHED_PASSWORDS); choose another one")
	case err != nil:
		return err
	}
	if u.IsAdmin {
		fmt.Fprintf(stdout, "created user %s (admin)\n", u.Email)
	} else {
		fmt.Fprintf(stdout, "created user %s\n", u.Email)
	}
	return nil
}

func userUnlock(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return appAccountCommand(ctx, "user unlock",
		"Ends the lockout of an account, existing or not, and the lock of its\n"+
			"second step, and forgets their failures. An application's account (decision API) is named as the\n"+
			"dashboard lists it: --email 'app NAME ACCOUNT'. The unlock is recorded as\n"+
			"a security event by \"cli\".\n",
		args, getenv, stdout, stderr, func(b *backend, addr string) error {
			wasLocked, err := b.svc.Unlock(ctx, addr, "cli")
			if err != nil {
				return err
			}
			if wasLocked {
				fmt.Fprintf(stdout, "unlocked %s\n", addr)
			} else {
				fmt.Fprintf(stdout, "%s was not locked\n", addr)
			}
			return nil
		})
}

// userSignOut is "user signout", the name the other commands' style asks
// for, and "user sign-out", the name it had first.
func userSignOut(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return accountCommand(ctx, "user "+name,
		"Signs an account out everywhere: ends every session and forgets every\n"+
			"known device, so that each browser is held by the account's limit and\n"+
			"lockout like a stranger's until it signs in again. Recorded as a\n"+
			"security event by \"cli\".\n",
		args, getenv, stdout, stderr, func(b *backend, addr string) error {
			switch err := b.svc.SignOutEverywhere(ctx, addr, "cli"); {
			case errors.Is(err, auth.ErrNoUser):
				return fmt.Errorf("no account has email %s", addr)
			case err != nil:
				return err
			}
			fmt.Fprintf(stdout, "signed out %s everywhere\n", addr)
			return nil
		})
}

// userRemoveFactors removes an account's second factors: the way back in
// for an owner who lost the phone and the recovery codes when no
// administrator can sign in to the dashboard to do it, the last one
// being that owner.
func userRemoveFactors(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return accountCommand(ctx, "user remove-factors",
		"Removes every second factor of an account (authenticator apps and\n"+
			"passkeys), with its recovery codes and the browsers that skip the second\n"+
			"step: the owner signs in with the password alone again, and enrols anew.\n"+
			"The command line sends no mail: tell the owner, whom the dashboard's\n"+
			"removal would have mailed. Recorded as a security event\n"+
			"(factor_removed) by \"cli\".\n",
		args, getenv, stdout, stderr, func(b *backend, addr string) error {
			n, err := b.svc.RemoveFactors(ctx, "cli", addr)
			switch {
			case errors.Is(err, auth.ErrNoUser):
				return fmt.Errorf("no account has email %s", addr)
			case err != nil:
				return err
			case n == 0:
				fmt.Fprintf(stdout, "%s has no second factor\n", addr)
			case n == 1:
				fmt.Fprintf(stdout, "removed the second factor of %s\n", addr)
			default:
				fmt.Fprintf(stdout, "removed %d second factors of %s\n", n, addr)
			}
			return nil
		})
}

// accountCommand runs a user command that acts on one account, named by
// --email: it reads the settings, opens the service, calls act with the
// normalised address, and closes the service, which writes the security
// events act recorded before the command ends.
func accountCommand(ctx context.Context, name, doc string, args []string, getenv func(string) string, stdout, stderr io.Writer,
	act func(b *backend, addr string) error) error {
	return runAccountCommand(ctx, name, doc, args, getenv, stdout, stderr, false, act)
}

// appAccountCommand is accountCommand for a command that also acts on an
// application's account, "app NAME ACCOUNT" as the dashboard lists it,
// its account folded as the decision API folds it.
func appAccountCommand(ctx context.Context, name, doc string, args []string, getenv func(string) string, stdout, stderr io.Writer,
	act func(b *backend, addr string) error) error {
	return runAccountCommand(ctx, name, doc, args, getenv, stdout, stderr, true, act)
}

func runAccountCommand(ctx context.Context, name, doc string, args []string, getenv func(string) string, stdout, stderr io.Writer,
	apps bool, act func(b *backend, addr string) error) error {
	fs := cli.NewFlagSet("xcloak", name, "--email ADDRESS [flags]", doc)
	email := fs.String("email", "", "mail `address` of the account (required)")
	cfg, err := loadConfig(fs, args, getenv, stdout, stderr, forUser)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	var addr string
	if apps && strings.HasPrefix(*email, "app ") {
		var ok bool
		if addr, ok = auth.ParseAppAccount(*email); !ok {
			return fmt.Errorf("--email %q is not an application's account: app NAME ACCOUNT", *email)
		}
	} else if addr, err = requireEmail(fs, *email, stderr); err != nil {
		return err
	}
	b, err := openUserBackend(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	return act(b, addr)
}

// requireEmail returns the normalised --email, or a usage error when it is
// missing and an error when it cannot be an address.
func requireEmail(fs *flag.FlagSet, email string, stderr io.Writer) (string, error) {
	if email == "" {
		fmt.Fprintf(stderr, "%s: --email is required\n", fs.Name())
		fs.SetOutput(stderr)
		fs.Usage()
		return "", cli.UsageError{Err: errors.New("--email is required")}
	}
	addr, err := auth.NormaliseEmail(email)
	if err != nil {
		return "", fmt.Errorf("--email %q is not a mail address", email)
	}
	return addr, nil
}

// openUserBackend builds the service for a user or apikey command, its
// background work not started (backend.start). Such commands sign no
// device cookie and send no mail, so they need neither the server's
// secret nor its public URL: a throwaway secret and a placeholder URL
// satisfy the service. Logs stay quiet unless something goes wrong, but
// for the audit stream: the security events the command records are
// written to stderr as serve writes them (newLogger), unless
// XCLOAK_AUDIT_LOG is off, so that an administrator's act from the
// command line reaches the SIEM like one from the dashboard.
func openUserBackend(ctx context.Context, cfg config, stderr io.Writer) (*backend, error) {
	cfg.Auth.Secret = randomBytes(32)
	cfg.Auth.PublicURL = &url.URL{Scheme: "http", Host: "localhost"}
	return openBackend(ctx, cfg, newLogger(stderr, slog.LevelWarn), nil, false)
}

// readPassword returns the first line of r without its line ending (\n or
// \r\n). It refuses an empty line, one longer than any password the
// service accepts, and one that still ends in \r (a line ending pasted
// from Windows, or a file with old Mac line endings), which would become
// part of the password and never be typed at a sign-in. The service
// refuses NUL bytes and bytes that are not UTF-8 (auth.ErrWeakPassword).
func readPassword(r io.Reader) (string, error) {
	// Reading one byte past the longest password with its \r\n is enough
	// to know a line is too long.
	line, err := bufio.NewReader(io.LimitReader(r, auth.MaxPasswordBytes+3)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password from stdin: %w", err)
	}
	if l, ok := strings.CutSuffix(line, "\n"); ok {
		line = strings.TrimSuffix(l, "\r")
	}
	switch {
	case line == "":
		return "", errors.New("no password on stdin: give it as the first line")
	case len(line) > auth.MaxPasswordBytes:
		return "", fmt.Errorf("password refused: longer than %d bytes", auth.MaxPasswordBytes)
	case strings.HasSuffix(line, "\r"):
		return "", errors.New("password refused: it ends in a carriage return (\\r), likely from a Windows line ending; give the password without it")
	}
	return line, nil
}

// promptPassword reads the password of account addr from stdin: at a
// terminal after a prompt, without echoing it (it would stay on the screen
// and in the scrollback); else the first line, as readPassword does. At
// a terminal, ctx ending (Ctrl-C) gives the terminal its echo back and
// returns at once: the read cannot be interrupted, and a second Ctrl-C
// would end the process with the echo still off.
func promptPassword(ctx context.Context, stdin io.Reader, stderr io.Writer, addr string) (string, error) {
	f, ok := stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return readPassword(stdin)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	fd := int(f.Fd())
	prompt := fmt.Sprintf("Password for %s (not shown): ", addr)
	restore, err := noEcho(fd)
	if errors.Is(err, errors.ErrUnsupported) {
		// No terminal settings to change here: x/term's read, which
		// Ctrl-C does not interrupt.
		fmt.Fprint(stderr, prompt)
		typed, err := term.ReadPassword(fd)
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("reading the password from the terminal: %w", err)
		}
		return readPassword(bytes.NewReader(append(typed, '\n')))
	}
	if err != nil {
		return "", fmt.Errorf("turning off the terminal's echo: %w", err)
	}
	defer restore()
	fmt.Fprint(stderr, prompt)
	type read struct {
		password string
		err      error
	}
	done := make(chan read, 1)
	go func() {
		password, err := readPassword(f)
		done <- read{password, err}
	}()
	select {
	case r := <-done:
		fmt.Fprintln(stderr)
		return r.password, r.err
	case <-ctx.Done():
		fmt.Fprintln(stderr)
		return "", ctx.Err()
	}
}
