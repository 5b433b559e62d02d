package auth_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestEndedSessionStopsPassingOnItsReplicaAtOnce: every way a session
// ends, on the replica that ended it, stops the session passing the
// proxies' cache at once, not a cache entry's second later. The clock
// stands still, so that an entry the ending failed to drop would still be
// trusted when the session is asked for again.
func TestEndedSessionStopsPassingOnItsReplicaAtOnce(t *testing.T) {
	f := newFixture(t, nil)
	f.advance(0)
	ctx := t.Context()
	const password = "the right password"
	c := client("192.0.2.70")

	// signIn signs email in from a new browser and returns its session.
	signIn := func(t *testing.T, email string) auth.Session {
		t.Helper()
		res, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: password, Client: c})
		if err != nil {
			t.Fatal(err)
		}
		sess, err := f.svc.Session(ctx, res.Session.Token)
		if err != nil {
			t.Fatal(err)
		}
		// As the store reads it, with the token the browser holds.
		sess.Token = res.Session.Token
		return sess
	}

	for i, tc := range []struct {
		name string
		end  func(t *testing.T, u auth.User, victim auth.Session)
	}{
		{"sign-out", func(t *testing.T, _ auth.User, victim auth.Session) {
			if err := f.svc.Logout(ctx, victim.Token); err != nil {
				t.Fatal(err)
			}
		}},
		{"session ended from the account page", func(t *testing.T, u auth.User, victim auth.Session) {
			other := signIn(t, u.Email)
			if _, err := f.svc.EndSession(ctx, other, other.Token, victim.PublicID, c); err != nil {
				t.Fatal(err)
			}
		}},
		{"sign out everywhere else", func(t *testing.T, u auth.User, _ auth.Session) {
			other := signIn(t, u.Email)
			if n, err := f.svc.EndOtherSessions(ctx, other, other.Token, c); err != nil || n != 1 {
				t.Fatalf("EndOtherSessions = %d, %v; want 1 ended", n, err)
			}
		}},
		{"password changed from another browser", func(t *testing.T, u auth.User, _ auth.Session) {
			other := signIn(t, u.Email)
			if _, err := f.svc.ChangePassword(ctx, auth.PasswordChange{Session: other.Token, Current: password,
				New: "a brand new password", Client: c}); err != nil {
				t.Fatal(err)
			}
		}},
		{"sign out everywhere", func(t *testing.T, u auth.User, _ auth.Session) {
			if err := f.svc.SignOutEverywhere(ctx, u.Email, "admin:root@example.com"); err != nil {
				t.Fatal(err)
			}
		}},
		{"password reset", func(t *testing.T, u auth.User, _ auth.Session) {
			token := requestResetToken(t, f, u.Email)
			if err := f.svc.ConfirmReset(ctx, token, "a brand new password", c); err != nil {
				t.Fatal(err)
			}
		}},
		{"password set", func(t *testing.T, u auth.User, _ auth.Session) {
			if err := f.svc.SetPassword(ctx, u.Email, "a brand new password", "cli"); err != nil {
				t.Fatal(err)
			}
		}},
		{"account deleted", func(t *testing.T, u auth.User, _ auth.Session) {
			if _, err := f.svc.DeleteUser(ctx, u.ID, "cli"); err != nil {
				t.Fatal(err)
			}
		}},
		{"attack mode signs out new devices", func(t *testing.T, u auth.User, victim auth.Session) {
			users, err := f.svc.SignOutNewDevices(ctx, victim.CreatedAt.Add(-time.Minute), nil)
			if err != nil || len(users) == 0 {
				t.Fatalf("SignOutNewDevices = %v, %v; want the account's new device signed out", users, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := f.addUser(t, fmt.Sprintf("ann%d@example.com", i), password, false)
			victim := signIn(t, u.Email)
			if _, err := f.svc.ProxySession(ctx, victim.Token); err != nil {
				t.Fatalf("a live session: %v", err)
			}
			tc.end(t, u, victim)
			if _, err := f.svc.ProxySession(context.Background(), victim.Token); !errors.Is(err, auth.ErrNoSession) {
				t.Errorf("ProxySession after the session ended on this replica: %v, want ErrNoSession", err)
			}
		})
	}
}
