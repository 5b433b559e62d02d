package auth_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached"
	"github.com/xcloak/xcloak/breached/breachedtest"
)

func openChecker(source string) (auth.BreachedChecker, error) {
	return breached.Open(source, 0, nil)
}

// TestChangePassword: from a known device, the change ends every other
// session and forgets every other device, keeps its own, lifts the
// session's restriction, and mails the owner a notice with a reset link.
func TestChangePassword(t *testing.T) {
	corpus := breachedtest.New(t)
	// The new browsers' notices (notify_test.go) would be mails and reset
	// tokens of their own.
	f := newFixture(t, func(c *auth.Config) { c.NotifyNewDevice = false }, withBreached(corpus.Checker(t)))
	f.addUser(t, "ann@example.com", "password123", false)
	login := func(ip, cookie string) auth.LoginResult {
		t.Helper()
		res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client(ip), DeviceCookie: cookie})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	mine, other := login("192.0.2.1", ""), login("192.0.2.2", "")
	corpus.Add(t, "password123")
	mine = login("192.0.2.1", mine.Device.Value)
	if !mine.Session.MustChangePassword {
		t.Fatal("no restriction to lift")
	}
	change := auth.PasswordChange{Session: mine.Session.Token, Current: "password123", New: "password123", Client: client("192.0.2.1"), DeviceCookie: mine.Device.Value}
	if _, err := f.svc.ChangePassword(t.Context(), change); !errors.Is(err, auth.ErrBreachedPassword) {
		t.Fatalf("changing to a breached password: %v, want ErrBreachedPassword", err)
	}
	change.New = "short"
	if _, err := f.svc.ChangePassword(t.Context(), change); !errors.Is(err, auth.ErrWeakPassword) {
		t.Fatalf("changing to a short password: %v, want ErrWeakPassword", err)
	}
	change.New = "a new one, nowhere leaked"
	rotated, err := f.svc.ChangePassword(t.Context(), change)
	if err != nil {
		t.Fatalf("ChangePassword: %v", err)
	}

	if rotated.Token == "" || rotated.Token == mine.Session.Token || rotated.MustChangePassword {
		t.Fatalf("the session after the change: %+v; want a new token, free", rotated)
	}
	if _, err := f.svc.Session(t.Context(), mine.Session.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("the changing session under its old token: %v, want ErrNoSession", err)
	}
	sess, err := f.svc.Session(t.Context(), rotated.Token)
	if err != nil || sess.MustChangePassword || sess.PublicID != mine.Session.PublicID ||
		!sess.ExpiresAt.Equal(rotated.ExpiresAt) || sess.ExpiresAt.Sub(mine.Session.ExpiresAt).Abs() > time.Millisecond {
		t.Fatalf("the changing session: %+v, %v; want it kept, free, expiring as before", sess, err)
	}
	if _, err := f.svc.Session(t.Context(), other.Session.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("the other session: %v, want ErrNoSession", err)
	}
	if n := countRows(t, f, "SELECT count(*) FROM devices"); n != 1 {
		t.Fatalf("%d known devices, want this browser's only", n)
	}
	// This browser is still a known device; the other one is a stranger.
	for _, c := range []struct {
		cookie string
		known  bool
	}{{mine.Device.Value, true}, {other.Device.Value, false}} {
		res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "a new one, nowhere leaked", Client: client("192.0.2.3"), DeviceCookie: c.cookie})
		if err != nil {
			t.Fatal(err)
		}
		if renewed := res.Device.Value == c.cookie; renewed != c.known {
			t.Errorf("device cookie kept = %v, want %v", renewed, c.known)
		}
	}
	body := f.mailBody(t, "ann@example.com")
	if !strings.Contains(body, "was changed") || !strings.Contains(body, "If this wasn't you") || resetLink.FindString(body) == "" {
		t.Errorf("mail does not say the password changed with a reset link:\n%s", body)
	}
	if n := countRows(t, f, "SELECT count(*) FROM password_reset_tokens"); n != 1 {
		t.Errorf("%d reset tokens, want the mail's one", n)
	}
	// It lives for the notices' window (an hour), not the reset's 30
	// minutes: past XCLOAK_LIMIT_NOTICE_ACCOUNT a change is unannounced,
	// and one of the notices before it still carries a live link.
	if window := f.cfg.Limits.Of(auth.RuleNoticeAccount).Window; window <= f.cfg.ResetTTL {
		t.Fatalf("the notices' window %s is no longer than a reset link's %s", window, f.cfg.ResetTTL)
	}
	if n := countRows(t, f, fmt.Sprintf("SELECT count(*) FROM password_reset_tokens WHERE expires_at - created_at >= interval '%d seconds'",
		int(f.cfg.Limits.Of(auth.RuleNoticeAccount).Window.Seconds()))); n != 1 {
		t.Errorf("the notice's link lives less than the notices' window")
	}
	if !strings.Contains(body, "within 1 hour") {
		t.Errorf("the notice does not say its link works for an hour:\n%s", body)
	}
	waitEvent(t, f, auth.EventPasswordChanged)
}

// waitEvent waits until an event of kind is written.
func waitEvent(t *testing.T, f *fixture, kind string) {
	t.Helper()
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, f, fmt.Sprintf("SELECT count(*) FROM security_events WHERE kind = '%s'", kind)); n != 1 {
		t.Fatalf("%d %s events, want 1", n, kind)
	}
}

// TestChangePasswordWrongCurrentCountsTowardsLockout: a wrong current
// password is a failed sign-in: Threshold of them lock the account, which
// then refuses the change and sign-ins alike, the right password too.
func TestChangePasswordWrongCurrentCountsTowardsLockout(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Lockout.Threshold = 3
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
	})
	f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	// No device cookie: the account's lockout counts, as for a sign-in.
	change := auth.PasswordChange{Session: res.Session.Token, New: "a new one, nowhere leaked", Client: client("192.0.2.1")}
	for i := range f.cfg.Lockout.Threshold {
		change.Current = fmt.Sprint("wrong ", i)
		if _, err := f.svc.ChangePassword(t.Context(), change); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("wrong current password %d: %v, want ErrInvalidCredentials", i, err)
		}
	}
	change.Current = "password123"
	if _, err := f.svc.ChangePassword(t.Context(), change); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("change with the right password on a locked account: %v, want ErrLimited", err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.9")}); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("sign-in on the account the changes locked: %v, want ErrLimited", err)
	}
	if n := countRows(t, f, "SELECT count(*) FROM lockouts"); n != 1 {
		t.Errorf("%d lockouts recorded, want 1", n)
	}
}

// TestChangePasswordNeedsASession: no session, no change, and nothing
// counted.
func TestChangePasswordNeedsASession(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	for _, token := range []string{"", "not a token", strings.Repeat("A", 43)} {
		_, err := f.svc.ChangePassword(t.Context(), auth.PasswordChange{Session: token, Current: "password123", New: "a new one, nowhere leaked", Client: client("192.0.2.1")})
		if !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("session %q: %v, want ErrNoSession", token, err)
		}
	}
}

// TestChangePasswordToItself: the current password as the new one is
// refused once the current one is verified (a wrong current password is
// still a failure), and the password stays.
func TestChangePasswordToItself(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	change := auth.PasswordChange{Session: res.Session.Token, Current: "password123", New: "password123", Client: client("192.0.2.1")}
	if _, err := f.svc.ChangePassword(t.Context(), change); !errors.Is(err, auth.ErrSamePassword) {
		t.Fatalf("changing the password to itself: %v, want ErrSamePassword", err)
	}
	change.Current, change.New = "not it at all", "not it at all"
	if _, err := f.svc.ChangePassword(t.Context(), change); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("a wrong current password, the same as the new: %v, want ErrInvalidCredentials", err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.2")}); err != nil {
		t.Fatalf("the password was changed: %v", err)
	}
}

// TestPasswordVariantsAreThePassword: passwords are stored in NFKC, so a
// full-width variant of a breached password is that breached password,
// and a full-width variant of the current one is the current one: both
// are refused.
func TestPasswordVariantsAreThePassword(t *testing.T) {
	corpus := breachedtest.New(t)
	corpus.Add(t, "password123")
	f := newFixture(t, nil, withBreached(corpus.Checker(t)))
	f.addUser(t, "bob@example.com", "correct horse 1", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "bob@example.com", Password: "correct horse 1", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	change := auth.PasswordChange{Session: res.Session.Token, Current: "correct horse 1", Client: client("192.0.2.1")}
	for _, c := range []struct {
		new  string
		want error
	}{
		{"ｐassword123", auth.ErrBreachedPassword}, // U+FF50, full-width p
		{"correct horse １", auth.ErrSamePassword}, // U+FF11, full-width 1
	} {
		change.New = c.new
		if _, err := f.svc.ChangePassword(t.Context(), change); !errors.Is(err, c.want) {
			t.Errorf("changing to %q: %v, want %v", c.new, err, c.want)
		}
	}
	if _, err := f.svc.CreateUser(t.Context(), "cy@example.com", "ｐassword123", false, "cli"); !errors.Is(err, auth.ErrBreachedPassword) {
		t.Errorf("creating an account with a full-width variant of a breached password: %v", err)
	}
}
