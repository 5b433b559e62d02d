package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/internal/testenv"
)

// TestUserAdminCommands: list, disable, enable, promote, demote, signout
// and delete act on the account --email names, as the dashboard does,
// each a security event by "cli", as add is; the last administrator is
// kept, and delete wants --yes. A disabled account's sign-in to a running server
// answers as a wrong password does.
func TestUserAdminCommands(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	const password = "correct horse battery"
	for _, e := range []string{"ann@example.com", "bob@example.com", "carl@example.com"} {
		addUser(t, vars, e, password+"\n")
	}
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := xcloak(t, vars, "", append([]string{"user"}, args...)...)
		if err != nil {
			t.Fatalf("user %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr)
		}
		return stdout
	}
	fails := func(want string, args ...string) {
		t.Helper()
		_, stderr, err := xcloak(t, vars, "", append([]string{"user"}, args...)...)
		if err == nil || !strings.Contains(err.Error()+stderr, want) {
			t.Errorf("user %s: %v %q, want an error with %q", strings.Join(args, " "), err, stderr, want)
		}
	}

	if got := run("promote", "--email", "ANN@example.com"); got != "promoted ann@example.com to administrator\n" {
		t.Errorf("promote printed %q", got)
	}
	fails("last enabled administrator", "demote", "--email", "ann@example.com")
	fails("last enabled administrator", "disable", "--email", "ann@example.com")
	fails("last enabled administrator", "delete", "--email", "ann@example.com", "--yes")
	fails("no account has email nobody@example.com", "disable", "--email", "nobody@example.com")
	fails("--yes", "delete", "--email", "bob@example.com")
	// A usage error says why, on stderr, where a user sees it.
	for _, limit := range []string{"0", "-5", "1001"} {
		_, stderr, err := xcloak(t, vars, "", "user", "list", "--limit", limit)
		if cli.ExitCode(err) != 2 || !strings.Contains(stderr, "--limit must be 1 to 100") {
			t.Errorf("user list --limit %s: %v, stderr %q; want exit 2 and why", limit, err, stderr)
		}
	}

	if got := run("disable", "--email", "bob@example.com"); got != "disabled bob@example.com\n" {
		t.Errorf("disable printed %q", got)
	}
	want := "EMAIL             ROLE    STATE     CREATED\n" +
		"ann@example.com   admin   enabled   %s\n" +
		"bob@example.com   member  disabled  %s\n" +
		"carl@example.com  member  enabled   %s\n"
	got := run("list")
	day := ""
	if f := strings.Fields(got); len(f) > 7 {
		day = f[7]
	}
	if want := fmt.Sprintf(want, day, day, day); got != want {
		t.Errorf("list printed\n%s\nwant\n%s", got, want)
	}
	if got := run("list", "--search", "B", "--limit", "1"); !strings.Contains(got, "bob@example.com") || strings.Contains(got, "more:") {
		t.Errorf("list --search B printed %q", got)
	}
	if got := run("list", "--limit", "1"); !strings.HasSuffix(got, "more: --after ann@example.com\n") {
		t.Errorf("list --limit 1 printed %q", got)
	}
	var page struct {
		Users []struct {
			Email    string `json:"email"`
			Disabled bool   `json:"disabled"`
		} `json:"users"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(run("list", "--json", "--all", "--limit", "1")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Users) != 3 || !page.Users[1].Disabled || page.NextCursor != "" {
		t.Errorf("list --json --all: %+v", page)
	}

	// A running server answers the disabled account's right password as
	// a wrong one.
	srv := startServe(t, vars)
	right := signIn(t, srv.base, "bob@example.com", password)
	wrong := signIn(t, srv.base, "carl@example.com", "a wrong password")
	if right.StatusCode != http.StatusUnauthorized || right.StatusCode != wrong.StatusCode {
		t.Errorf("disabled account's right password: %d; a wrong password: %d", right.StatusCode, wrong.StatusCode)
	}

	if got := run("enable", "--email", "bob@example.com"); got != "enabled bob@example.com\n" {
		t.Errorf("enable printed %q", got)
	}
	if resp := signIn(t, srv.base, "bob@example.com", password); resp.StatusCode != http.StatusOK {
		t.Errorf("sign-in after enable: %d", resp.StatusCode)
	}
	if got := run("signout", "--email", "bob@example.com"); got != "signed out bob@example.com everywhere\n" {
		t.Errorf("signout printed %q", got)
	}
	if got := run("delete", "--email", "bob@example.com", "--yes"); got != "deleted bob@example.com\n" {
		t.Errorf("delete printed %q", got)
	}
	if got := run("list"); strings.Contains(got, "bob@") {
		t.Errorf("list after delete: %q", got)
	}

	conn := connect(t, vars["XCLOAK_DATABASE_URL"])
	rows, err := conn.Query(t.Context(), `SELECT kind FROM security_events WHERE account_key = 'bob@example.com' AND detail->>'by' = 'cli' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	if got, want := strings.Join(kinds, " "), "user_created user_disabled user_enabled signed_out_everywhere user_deleted"; got != want {
		t.Errorf("bob's events by cli: %s, want %s", got, want)
	}
}

// TestUserRemoveFactors: "user remove-factors" is the way back in for an
// owner who lost the phone and the recovery codes when no administrator
// can reach the dashboard: it removes the account's factors and recovery
// codes and records it by "cli", as the dashboard's removal does. The
// command line sends no mail.
func TestUserRemoveFactors(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	sink := testenv.SMTP(t)
	vars["XCLOAK_SMTP_URL"] = sink.URL()
	delete(vars, "XCLOAK_MAIL_LOG")
	addUser(t, vars, "ann@example.com", "correct horse battery\n")
	conn := connect(t, vars["XCLOAK_DATABASE_URL"])
	if _, err := conn.Exec(t.Context(), `
		WITH u AS (SELECT id FROM users WHERE email = 'ann@example.com'),
		f AS (INSERT INTO second_factors (user_id, kind, name, secret, credential_id, created_at, confirmed_at)
			SELECT id, kind, 'lost', '\x00', cred, now(), now() FROM u, (VALUES ('totp', NULL), ('webauthn', '\x01'::bytea)) k(kind, cred))
		INSERT INTO recovery_codes (user_id, hash, created_at) SELECT id, sha256('code'), now() FROM u`); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, err := xcloak(t, vars, "", "user", "remove-factors", "--email", "ANN@example.com")
	if err != nil || stdout != "removed 2 second factors of ann@example.com\n" {
		t.Fatalf("remove-factors: %v, stdout %q\nstderr:\n%s", err, stdout, stderr)
	}
	var factors, codes, events int
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM second_factors), (SELECT count(*) FROM recovery_codes),
		(SELECT count(*) FROM security_events WHERE kind = 'factor_removed' AND account_key = 'ann@example.com'
			AND detail->>'by' = 'cli' AND detail->>'count' = '2')`).Scan(&factors, &codes, &events); err != nil {
		t.Fatal(err)
	}
	if factors != 0 || codes != 0 || events != 1 {
		t.Errorf("after remove-factors: %d factors, %d recovery codes, %d events by cli; want none, none, one", factors, codes, events)
	}
	// The command line sends no mail, and writes none, links included, to
	// the terminal: it says what it did not send.
	if !strings.Contains(stderr, "the command line sends no mail") || strings.Contains(stderr, "/password-reset/") {
		t.Errorf("remove-factors' log, want the unsent mail named and no link in it:\n%s", stderr)
	}
	if got := sink.Messages(); len(got) != 0 {
		t.Errorf("remove-factors sent %d mails, want none", len(got))
	}

	if stdout, _, err := xcloak(t, vars, "", "user", "remove-factors", "--email", "ann@example.com"); err != nil || stdout != "ann@example.com has no second factor\n" {
		t.Errorf("remove-factors again: %v, stdout %q", err, stdout)
	}
	if _, _, err := xcloak(t, vars, "", "user", "remove-factors", "--email", "nobody@example.com"); err == nil || !strings.Contains(err.Error(), "no account has email nobody@example.com") {
		t.Errorf("remove-factors of an unknown account: %v, want an error", err)
	}
}

// unreadStdin fails the test if the command reads it.
type unreadStdin struct{ t *testing.T }

func (r unreadStdin) Read([]byte) (int, error) {
	r.t.Error("the password was read for an address that cannot be an account's")
	return 0, io.EOF
}

// TestUserAddRefusesUnmailableAddressFirst: an address that reads as one
// (an '@' between two non-empty sides) but that a mail would not reach as
// written, such as one with a trailing comma pasted from a list or in
// angle brackets, cannot be an account's. user add says so as it says it
// of "cat", naming --email, before it asks for the password, rather than
// reading and hashing the password to end in "auth: invalid email address".
func TestUserAddRefusesUnmailableAddressFirst(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	for _, email := range []string{"ann@example.com,", "<ann@example.com>", "ann@@example.com", `"ann"@example.com`} {
		var stdout, stderr strings.Builder
		err := run(t.Context(), []string{"xcloak", "user", "add", "--email", email}, environ(vars), unreadStdin{t}, &stdout, &stderr)
		want := fmt.Sprintf("--email %q is not a mail address", email)
		if err == nil || !strings.Contains(err.Error(), want) || cli.ExitCode(err) != 1 {
			t.Errorf("%s: err = %v (exit %d), want one containing %s", email, err, cli.ExitCode(err), want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%s: printed %q", email, stdout.String())
		}
	}
}

// TestUserListHintIsShellQuoted: the --after that continues a listing is
// printed ready to paste into a shell, whatever the email holds (an
// apostrophe, an ampersand are valid in its local part).
func TestUserListHintIsShellQuoted(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	for _, e := range []string{"a.o'neil&co@example.com", "b@example.com"} {
		addUser(t, vars, e, "correct horse battery\n")
	}
	stdout, stderr, err := xcloak(t, vars, "", "user", "list", "--limit", "1")
	if err != nil {
		t.Fatalf("user list: %v\nstderr:\n%s", err, stderr)
	}
	if want := `more: --after 'a.o'\''neil&co@example.com'` + "\n"; !strings.HasSuffix(stdout, want) {
		t.Errorf("user list --limit 1 printed %q; want it to end %q", stdout, want)
	}
}
