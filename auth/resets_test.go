package auth_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

var resetLink = regexp.MustCompile(`https://login\.example\.test/password-reset/([A-Za-z0-9_-]{43})`)

// requestResetToken asks for a reset for email and returns the token from
// the mail that arrives at the SMTP sink.
func requestResetToken(t *testing.T, f *fixture, email string) string {
	t.Helper()
	if err := f.svc.RequestReset(t.Context(), email, client("198.51.100.20")); err != nil {
		t.Fatalf("RequestReset: %v", err)
	}
	// The owner may have other mail waiting (a lockout's notice, say),
	// queued before the reset's and sent off the request's path: the
	// reset's is the first with a reset link.
	var bodies []string
	for range 5 {
		body := f.mailBody(t, email)
		if found := resetLink.FindStringSubmatch(body); found != nil {
			return found[1]
		}
		bodies = append(bodies, body)
	}
	t.Fatalf("no reset link built from the public URL in the mail bodies:\n%s", strings.Join(bodies, "\n---\n"))
	return ""
}

func TestResetFlow(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "old password", false)
	old, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "old password", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}

	token := requestResetToken(t, f, "ANN@example.com")
	if err := f.svc.CheckResetToken(t.Context(), token, client("198.51.100.21")); err != nil {
		t.Fatalf("CheckResetToken on a fresh token: %v", err)
	}
	if err := f.svc.ConfirmReset(t.Context(), token, "short", client("192.0.2.1")); !errors.Is(err, auth.ErrWeakPassword) {
		t.Fatalf("weak password: %v, want ErrWeakPassword", err)
	}
	if err := f.svc.ConfirmReset(t.Context(), token, "new password 1", client("192.0.2.1")); err != nil {
		t.Fatalf("ConfirmReset: %v", err)
	}
	if _, err := f.svc.Session(t.Context(), old.Session.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("session from before the reset: %v, want ErrNoSession", err)
	}
	if err := f.svc.ConfirmReset(t.Context(), token, "new password 2", client("192.0.2.1")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("reused token: %v, want ErrInvalidToken", err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "old password", Client: client("192.0.2.1")}); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("old password after reset: %v", err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "new password 1", Client: client("192.0.2.1")}); err != nil {
		t.Fatalf("new password after reset: %v", err)
	}
	var stored int
	if err := f.db.QueryRow(t.Context(), "SELECT count(*) FROM password_reset_tokens WHERE token_hash = convert_to($1, 'UTF8')", token).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("the plain token is in the database (%d rows, %v)", stored, err)
	}
}

func TestResetTokenExpires(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "bob@example.com", "old password", false)
	token := requestResetToken(t, f, "bob@example.com")
	f.advance(f.cfg.ResetTTL + time.Second)
	if err := f.svc.CheckResetToken(t.Context(), token, client("198.51.100.21")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("expired token: %v, want ErrInvalidToken", err)
	}
	if err := f.svc.ConfirmReset(t.Context(), token, "new password 1", client("192.0.2.1")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("expired token: %v, want ErrInvalidToken", err)
	}
}

func TestResetTokenSingleUseUnderRace(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "cat@example.com", "old password", false)
	token := requestResetToken(t, f, "cat@example.com")
	results := make(chan error, 10)
	start := make(chan struct{})
	for range 10 {
		go func() {
			<-start
			results <- f.svc.ConfirmReset(t.Context(), token, "new password x", client("192.0.2.1"))
		}()
	}
	close(start)
	ok := 0
	for range 10 {
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.Is(err, auth.ErrInvalidToken):
		default:
			t.Errorf("unexpected: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d confirmations succeeded with one token, want 1", ok)
	}
}

// TestResetDoesNotRevealAccounts: a reset for an address without an
// account is accepted like any other and sends nothing. The unknown
// address is asked for first, and the sink read only once every queued
// request has been handled, so a mail for it cannot arrive too late to be
// seen.
func TestResetDoesNotRevealAccounts(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "real@example.com", "old password", false)
	for _, email := range []string{"ghost@example.com", "real@example.com"} {
		if err := f.svc.RequestReset(t.Context(), email, client("192.0.2.1")); err != nil {
			t.Fatalf("%s: %v, want nil (accepted) either way", email, err)
		}
	}
	f.waitResets(t)
	f.mail.WaitFor(t, "real@example.com")
	for _, m := range f.mail.Messages() {
		for _, to := range m.To {
			if to == "ghost@example.com" {
				t.Fatal("mail sent for an address without an account")
			}
		}
	}
}

// TestResetSpendsEveryOpenLink: confirming one of two open reset links of
// an account makes the other one invalid too.
func TestResetSpendsEveryOpenLink(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "two@example.com", "old password", false)
	first := requestResetToken(t, f, "two@example.com")
	second := requestResetToken(t, f, "two@example.com")
	if first == second {
		t.Fatal("two requests gave the same link")
	}
	if err := f.svc.ConfirmReset(t.Context(), second, "new password 1", client("192.0.2.1")); err != nil {
		t.Fatalf("ConfirmReset: %v", err)
	}
	if err := f.svc.CheckResetToken(t.Context(), first, client("198.51.100.21")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("the other open link after a reset: %v, want ErrInvalidToken", err)
	}
	if err := f.svc.ConfirmReset(t.Context(), first, "new password 2", client("192.0.2.1")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("confirming the other open link after a reset: %v, want ErrInvalidToken", err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "two@example.com", Password: "new password 1", Client: client("192.0.2.1")}); err != nil {
		t.Fatalf("sign-in with the password set first: %v", err)
	}
}

func TestResetLimits(t *testing.T) {
	f := newFixture(t, nil)
	lim := f.cfg.Limits[auth.RuleResetAccount].Count
	for i := range lim {
		if err := f.svc.RequestReset(t.Context(), "d@example.com", client("192.0.2.1")); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	err := f.svc.RequestReset(t.Context(), "d@example.com", client("192.0.2.2"))
	var le *auth.LimitedError
	if !errors.As(err, &le) || le.RetryAfter <= 0 {
		t.Fatalf("request past the per-account limit: %v, want LimitedError", err)
	}
	// The per-network limit, across accounts.
	for i := range f.cfg.Limits[auth.RuleResetIP].Count {
		if err := f.svc.RequestReset(t.Context(), "e"+string(rune('a'+i))+"@example.com", client("192.0.2.3")); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	if err := f.svc.RequestReset(t.Context(), "z@example.com", client("192.0.2.3")); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("request past the per-network limit: %v", err)
	}
	// And reset confirmations per network.
	for range f.cfg.Limits[auth.RuleResetConfirmIP].Count {
		if err := f.svc.ConfirmReset(t.Context(), "bad", "whatever password", client("192.0.2.4")); !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("bad token: %v", err)
		}
	}
	if err := f.svc.ConfirmReset(t.Context(), "bad", "whatever password", client("192.0.2.4")); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("confirmation past the per-network limit: %v", err)
	}
}

func TestJanitorRemovesExpiredRows(t *testing.T) {
	f := newFixture(t, nil)
	u := f.addUser(t, "ann@example.com", "correct horse", false)
	for _, q := range []string{
		`INSERT INTO security_events (at, kind) VALUES (now() - interval '91 days', 'login_failed'), (now(), 'login_failed')`,
		`INSERT INTO sessions (id_hash, user_id, created_at, expires_at) VALUES (sha256('a'), $1, now() - interval '2 days', now() - interval '1 day'), (sha256('b'), $1, now(), now() + interval '1 hour')`,
		`INSERT INTO password_reset_tokens (token_hash, user_id, created_at, expires_at) VALUES (sha256('c'), $1, now() - interval '3 days', now() - interval '2 days'), (sha256('d'), $1, now(), now() + interval '30 minutes')`,
		`INSERT INTO unlock_tokens (token_hash, user_id, created_at, expires_at) VALUES (sha256('e'), $1, now() - interval '3 days', now() - interval '2 days'), (sha256('f'), $1, now(), now() + interval '30 minutes')`,
		`INSERT INTO devices (nonce_hash, user_id, created_at, last_seen_at) VALUES (sha256('g'), $1, now() - interval '200 days', now() - interval '181 days'), (sha256('h'), $1, now(), now())`,
		`INSERT INTO webauthn_ceremonies (binding_hash, purpose, session, expires_at) VALUES (sha256('i'), 'passkey', '{}', now() - interval '1 minute'), (sha256('j'), 'passkey', '{}', now() + interval '5 minutes')`,
	} {
		args := []any{}
		if strings.Contains(q, "$1") {
			args = append(args, u.ID)
		}
		if _, err := f.db.Exec(t.Context(), q, args...); err != nil {
			t.Fatal(err)
		}
	}
	// The service's own janitor may sweep too; either way, afterwards only
	// the live rows are left.
	auth.Sweep(f.svc, t.Context())
	for table, live := range map[string]string{
		"security_events":       "at > now() - interval '1 day'",
		"sessions":              "expires_at > now()",
		"password_reset_tokens": "expires_at > now()",
		"unlock_tokens":         "expires_at > now()",
		"devices":               "last_seen_at > now() - interval '1 day'",
		"webauthn_ceremonies":   "expires_at > now()",
	} {
		// One query: the service's own events may land between two.
		var all, kept int
		if err := f.db.QueryRow(t.Context(), "SELECT count(*), count(*) FILTER (WHERE "+live+") FROM "+table).Scan(&all, &kept); err != nil {
			t.Fatal(err)
		}
		if all != kept || kept == 0 {
			t.Errorf("%s: %d rows, %d of them live; want only the live ones, kept", table, all, kept)
		}
	}
}

// TestResetRefusesPasswordShortAsTyped: a new password is as long as the
// characters typed, not as its NFKC form, which spells one ligature or
// fraction out in many: "ﷺ" is one character and eighteen once
// normalised, "ⅷⅷ" two and eight. The link still works after.
func TestResetRefusesPasswordShortAsTyped(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "old password", false)
	token := requestResetToken(t, f, "ann@example.com")
	for _, short := range []string{"\ufdfa", "\u2177\u2177", "\u2026\u2026\u2026", "\u337f\u337f"} {
		if err := f.svc.ConfirmReset(t.Context(), token, short, client("192.0.2.1")); !errors.Is(err, auth.ErrWeakPassword) {
			t.Errorf("new password %q of %d characters: %v, want ErrWeakPassword", short, len([]rune(short)), err)
		}
	}
	if err := f.svc.ConfirmReset(t.Context(), token, "new password 1", client("192.0.2.1")); err != nil {
		t.Fatalf("ConfirmReset after the refusals: %v", err)
	}
}
