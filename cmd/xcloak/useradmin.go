package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/cli"
)

// The account administration commands: what an administrator does from
// the dashboard's account pages, recorded as security events by "cli".

// userList prints the accounts, a page at a time or all of them.
func userList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("xcloak", "user list", "[--search PREFIX] [--after EMAIL] [--limit N | --all] [--json] [flags]",
		"Lists accounts by email, 50 at a time: their email, role, state\n"+
			"(enabled or disabled) and creation date. --search keeps the emails\n"+
			"that start with PREFIX (in any case). A page that is not the last ends\n"+
			"with the --after that continues it; --all lists every page.\n")
	search := fs.String("search", "", "list only emails that start with `prefix`")
	after := fs.String("after", "", "start after the account with this `email` (a previous page's last)")
	limit := fs.Int("limit", 50, fmt.Sprintf("accounts per page, 1 to %d", auth.MaxUserPage))
	all := fs.Bool("all", false, "list every page")
	asJSON := fs.Bool("json", false, `print {"users": [...], "next_cursor": ...} as the API does`)
	cfg, err := loadConfig(fs, args, getenv, stdout, stderr, forUser)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > auth.MaxUserPage {
		fmt.Fprintf(stderr, "%s: --limit must be 1 to %d\n", fs.Name(), auth.MaxUserPage)
		return cli.UsageError{Err: fmt.Errorf("--limit must be 1 to %d", auth.MaxUserPage)}
	}
	b, err := openUserBackend(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	var users []auth.User
	next := *after
	for {
		page, err := b.svc.SearchUsers(ctx, *search, next, *limit)
		var field *auth.FieldError
		if errors.As(err, &field) {
			return fmt.Errorf("--%s %s", map[string]string{"q": "search", "after": "after"}[field.Field], field.Message)
		}
		if err != nil {
			return err
		}
		users = append(users, page.Users...)
		next = page.Next
		if !*all || next == "" {
			break
		}
	}
	if *asJSON {
		return writeUsersJSON(stdout, users, next)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EMAIL\tROLE\tSTATE\tCREATED")
	for _, u := range users {
		role, state := "member", "enabled"
		if u.IsAdmin {
			role = "admin"
		}
		if u.Disabled() {
			state = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Email, role, state, u.CreatedAt.UTC().Format(time.DateOnly))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(stdout, "more: --after %s\n", shellQuote(next))
	}
	return nil
}

// shellQuote returns s as a POSIX shell reads it back as one word: as it
// is when every byte is one no shell treats specially, else in single
// quotes, each single quote in it ending them, escaped with a backslash,
// and starting them again.
func shellQuote(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("@._+-=/:,%", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeUsersJSON prints accounts in the shape of GET /api/v1/admin/users.
func writeUsersJSON(w io.Writer, users []auth.User, next string) error {
	type userJSON struct {
		ID         int64      `json:"id"`
		Email      string     `json:"email"`
		Admin      bool       `json:"admin"`
		Disabled   bool       `json:"disabled"`
		CreatedAt  time.Time  `json:"created_at"`
		DisabledAt *time.Time `json:"disabled_at,omitempty"`
	}
	out := struct {
		Users      []userJSON `json:"users"`
		NextCursor string     `json:"next_cursor,omitempty"`
	}{Users: []userJSON{}, NextCursor: next}
	for _, u := range users {
		j := userJSON{ID: u.ID, Email: u.Email, Admin: u.IsAdmin, Disabled: u.Disabled(), CreatedAt: u.CreatedAt.UTC()}
		if u.Disabled() {
			at := u.DisabledAt.UTC()
			j.DisabledAt = &at
		}
		out.Users = append(out.Users, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// adminAction is one account command: what it does to the account and
// what it prints when done.
type adminAction struct {
	name, doc string
	do        func(ctx context.Context, svc *auth.Service, id int64) (auth.User, error)
	done      string // printed with the email
}

var (
	userDisableAction = adminAction{"user disable",
		"Disables an account: its sessions end, its known devices are forgotten,\n" +
			"and from then on its sign-ins fail exactly as a wrong password does, and\n" +
			"it is mailed nothing. The last enabled administrator cannot be disabled.\n",
		func(ctx context.Context, svc *auth.Service, id int64) (auth.User, error) {
			return svc.DisableUser(ctx, id, "cli")
		},
		"disabled %s\n"}
	userEnableAction = adminAction{"user enable",
		"Enables a disabled account: it signs in with the password it had.\n",
		func(ctx context.Context, svc *auth.Service, id int64) (auth.User, error) {
			return svc.EnableUser(ctx, id, "cli")
		},
		"enabled %s\n"}
	userPromoteAction = adminAction{"user promote",
		"Makes an account an administrator.\n",
		func(ctx context.Context, svc *auth.Service, id int64) (auth.User, error) {
			return svc.PromoteUser(ctx, id, "cli")
		},
		"promoted %s to administrator\n"}
	userDemoteAction = adminAction{"user demote",
		"Makes an administrator a member. The last enabled administrator cannot\nbe demoted.\n",
		func(ctx context.Context, svc *auth.Service, id int64) (auth.User, error) {
			return svc.DemoteUser(ctx, id, "cli")
		},
		"demoted %s to member\n"}
)

// userAdminCommand runs one account command on the account --email names.
func userAdminCommand(ctx context.Context, a adminAction, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return accountCommand(ctx, a.name, a.doc+"Recorded as a security event by \"cli\".\n",
		args, getenv, stdout, stderr, func(b *backend, addr string) error {
			u, err := accountID(ctx, b, addr)
			if err != nil {
				return err
			}
			if _, err := a.do(ctx, b.svc, u.ID); err != nil {
				return adminError(err, addr)
			}
			fmt.Fprintf(stdout, a.done, addr)
			return nil
		})
}

// accountID looks an account up by its normalised email.
func accountID(ctx context.Context, b *backend, addr string) (auth.User, error) {
	u, err := b.svc.UserByEmail(ctx, addr)
	if errors.Is(err, auth.ErrNoUser) {
		return auth.User{}, fmt.Errorf("no account has email %s", addr)
	}
	return u, err
}

// adminError says why an account command was refused.
func adminError(err error, addr string) error {
	switch {
	case errors.Is(err, auth.ErrNoUser):
		return fmt.Errorf("no account has email %s", addr)
	case errors.Is(err, auth.ErrLastAdmin):
		return fmt.Errorf("%s is the last enabled administrator: promote another account first", addr)
	}
	return err
}

// userDelete deletes an account, only with --yes.
func userDelete(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("xcloak", "user delete", "--email ADDRESS --yes [flags]",
		"Deletes an account with its sessions, known devices and open links. Its\n"+
			"security events stay, under its email. It cannot be undone, so --yes is\n"+
			"required; \"xcloak user disable\" stops an account reversibly. The last\n"+
			"enabled administrator cannot be deleted. Recorded as a security event by\n"+
			"\"cli\".\n")
	email := fs.String("email", "", "mail `address` of the account (required)")
	yes := fs.Bool("yes", false, "confirm the deletion")
	cfg, err := loadConfig(fs, args, getenv, stdout, stderr, forUser)
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
	if !*yes {
		fmt.Fprintf(stderr, "%s: deleting %s cannot be undone; add --yes to confirm\n", fs.Name(), addr)
		return cli.UsageError{Err: errors.New("--yes is required")}
	}
	b, err := openUserBackend(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	u, err := accountID(ctx, b, addr)
	if err != nil {
		return err
	}
	if _, err := b.svc.DeleteUser(ctx, u.ID, "cli"); err != nil {
		return adminError(err, addr)
	}
	fmt.Fprintf(stdout, "deleted %s\n", addr)
	return nil
}
