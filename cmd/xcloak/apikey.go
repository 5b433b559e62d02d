package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/cli"
)

const apikeyUsage = `usage: xcloak apikey <command> [flags]

Manages the keys applications call the decision API with
(POST /api/v1/attempts), directly in Postgres; the server need not run.
A running server sees a new or revoked key within a second.

Commands:
  add      make a key for an application and print it, once
  list     list the keys: name, application, created, revoked, last used
  revoke   revoke the key in force of a name

Run "xcloak apikey <command> --help" for the flags of a command.
`

// apikey runs the API key commands.
func apikey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "xcloak apikey: no command given\n\n%s", apikeyUsage)
		return cli.UsageError{Err: errors.New("no apikey command given")}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, apikeyUsage)
		return nil
	case "add":
		return apikeyAdd(ctx, args[1:], getenv, stdout, stderr)
	case "list":
		return apikeyList(ctx, args[1:], getenv, stdout, stderr)
	case "revoke":
		return apikeyRevoke(ctx, args[1:], getenv, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "xcloak apikey: unknown command %q\n\n%s", args[0], apikeyUsage)
		return cli.UsageError{Err: fmt.Errorf("unknown apikey command %q", args[0])}
	}
}

func apikeyAdd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var app *string
	flags := func(fs *flag.FlagSet) {
		app = fs.String("app", "", "the `application` the key speaks for, which an earlier key (in force or revoked) was made for; default NAME")
	}
	return apikeyCommand(ctx, "apikey add", "--name NAME [--app APP] [flags]",
		"Makes a key named NAME (1 to 64 characters of A-Z, a-z, 0-9, '.', '_'\n"+
			"and '-') and prints it. Only its SHA-256 is kept: it is never shown\n"+
			"again. The key speaks for the application NAME, or, with --app, for\n"+
			"the application APP of an earlier key: the application is the\n"+
			"identity in events, on the dashboard and in the namespace of its\n"+
			"accounts, whose limits, lockouts and known devices are the same\n"+
			"whichever of its keys asks. To replace a key without a pause, add\n"+
			"one under a new name with --app, deploy it, then revoke the old one.\n"+
			"A name whose keys are all revoked may be given to a new key, which\n"+
			"takes the application's history; one that a key of another name in\n"+
			"force speaks for (shop, once shop-2 replaced it) is refused without\n"+
			"--app. Recorded as a security event (api_key_created) by \"cli\",\n"+
			"with the application, the name and the key's id, never the key.\n",
		true, flags, args, getenv, stdout, stderr, func(b *backend, name string) error {
			appName := *app
			var key string
			var err error
			if appName == "" {
				appName = name
				key, _, err = b.svc.AddAPIKey(ctx, name, "cli")
			} else {
				if err := auth.CheckAPIKeyName(appName); err != nil {
					return fmt.Errorf("--app %q: an application's name is 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", appName, auth.MaxAPIKeyName)
				}
				key, _, err = b.svc.AddAPIKeyFor(ctx, name, appName, "cli")
			}
			switch {
			case errors.Is(err, auth.ErrAPIKeyExists):
				return fmt.Errorf("a key named %s is in force already; revoke it first, or give the new one another name with --app %s", name, appName)
			case errors.Is(err, auth.ErrAppInUse):
				return fmt.Errorf("a key of another name in force speaks for the application %s (apikey list shows it); "+
					"to add one more key for it, give --app %s", name, name)
			case errors.Is(err, auth.ErrNoApp):
				return fmt.Errorf("--app %s: no key has been made for that application (apikey list shows them)", appName)
			case err != nil:
				return err
			}
			if _, err := fmt.Fprintln(stdout, key); err != nil {
				// The key is shown once: one not written (stdout on a full
				// disk) reached no one, and would stay in force, holding
				// its name, with nobody to use or miss it.
				if rerr := b.svc.RevokeAPIKey(ctx, name, "cli"); rerr != nil {
					return fmt.Errorf("the key could not be written (%w), nor revoked (%w): revoke it with xcloak apikey revoke --name %s", err, rerr, name)
				}
				return fmt.Errorf("the key could not be written, so it was revoked: %w", err)
			}
			fmt.Fprintf(stdout, "This key for %s will not be shown again: store it now.\n", appName)
			return nil
		})
}

func apikeyRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return apikeyCommand(ctx, "apikey revoke", "--name NAME [flags]",
		"Revokes the key in force named NAME; the application's other keys, if\n"+
			"any, go on. Every replica refuses it within a second. It stays\n"+
			"listed, as revoked. Recorded as a security event (api_key_revoked) by\n"+
			"\"cli\".\n",
		true, nil, args, getenv, stdout, stderr, func(b *backend, name string) error {
			err := b.svc.RevokeAPIKey(ctx, name, "cli")
			if errors.Is(err, auth.ErrNoAPIKey) {
				return fmt.Errorf("no key named %s is in force", name)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked the key of %s\n", name)
			return nil
		})
}

func apikeyList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return apikeyCommand(ctx, "apikey list", "[flags]",
		"Lists every key, revoked ones included, oldest first: its name, the\n"+
			"application it speaks for, when it was made and revoked, and when it\n"+
			"was last used (noted at most once a minute). Never the key, which is\n"+
			"not kept, nor its hash.\n",
		false, nil, args, getenv, stdout, stderr, func(b *backend, _ string) error {
			keys, err := b.svc.ListAPIKeys(ctx)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tAPP\tCREATED\tREVOKED\tLAST USED")
			for _, k := range keys {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.Name, k.App, when(k.CreatedAt), when(k.RevokedAt), when(k.LastUsedAt))
			}
			return w.Flush()
		})
}

// when shows a time in the lists of the commands: UTC to the second, "-"
// for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// apikeyCommand runs an apikey command: it reads the settings, the flags
// that flags (if not nil) adds and, when needsName, a valid --name, opens
// the service, calls act, and closes the service.
func apikeyCommand(ctx context.Context, name, args0, doc string, needsName bool, flags func(*flag.FlagSet), args []string,
	getenv func(string) string, stdout, stderr io.Writer, act func(b *backend, name string) error) error {
	fs := cli.NewFlagSet("xcloak", name, args0, doc)
	var keyName *string
	if needsName {
		keyName = fs.String("name", "", "`name` of the key (required)")
	}
	if flags != nil {
		flags(fs)
	}
	cfg, err := loadConfig(fs, args, getenv, stdout, stderr, forUser)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	n := ""
	if needsName {
		n = *keyName
		if n == "" {
			fmt.Fprintf(stderr, "%s: --name is required\n", fs.Name())
			fs.SetOutput(stderr)
			fs.Usage()
			return cli.UsageError{Err: errors.New("--name is required")}
		}
		if err := auth.CheckAPIKeyName(n); err != nil {
			return fmt.Errorf("--name %q: a name is 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", n, auth.MaxAPIKeyName)
		}
	}
	b, err := openUserBackend(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	return act(b, n)
}
