package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestSessionEndedMeanwhileActsOnNothing: a request of the owner's
// session that comes to the store while a password change (or anything
// else holding the account's row) is ending that session waits for it,
// then finds its session gone: it ends no session, forgets no device and
// counts no sign-out. Each case holds the account's row and deletes the
// asking session in that hold, as the change does, while the request
// queues behind it.
func TestSessionEndedMeanwhileActsOnNothing(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	now := time.Now()
	for _, c := range []struct {
		name string
		act  func(u auth.User, target string, device string) error
	}{
		{"a session ended", func(u auth.User, target, _ string) error {
			return s.EndSession(ctx, u.ID, hashOf("thief "+u.Email), target)
		}},
		{"the others ended", func(u auth.User, _, _ string) error {
			_, err := s.EndOtherSessions(ctx, u.ID, hashOf("thief "+u.Email))
			return err
		}},
		{"a device forgotten", func(u auth.User, _, device string) error {
			return s.ForgetDevice(ctx, u.ID, hashOf("thief "+u.Email), device)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := addUser(t, s, c.name+"@example.com", false)
			owner := auth.Session{UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour), PublicID: auth.NewPublicID()}
			for _, who := range []string{"owner ", "thief "} {
				sess := owner
				if who == "thief " {
					sess.PublicID = auth.NewPublicID()
				}
				if err := s.CreateSession(ctx, hashOf(who+u.Email), sess, u.PasswordHash, u.SignOuts); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.AddDevice(ctx, u.ID, u.PasswordHash, u.SignOuts, hashOf("device "+u.Email), now, 10, false); err != nil {
				t.Fatal(err)
			}
			devices, err := s.AccountDevices(ctx, u.ID, 10)
			if err != nil || len(devices) != 1 {
				t.Fatalf("devices: %+v, %v", devices, err)
			}

			hold := holdRows(t, s, `SELECT FROM users WHERE id = $1 FOR NO KEY UPDATE`, u.ID)
			if _, err := hold.Exec(ctx, `DELETE FROM sessions WHERE id_hash = $1`, hashOf("thief "+u.Email)); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- c.act(u, owner.PublicID, devices[0].PublicID) }()
			waitForLockWaits(t, s.Pool(), 1)
			if err := hold.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; !errors.Is(err, auth.ErrNoSession) {
				t.Errorf("the ended session's request: %v, want ErrNoSession", err)
			}
			if _, err := s.SessionByHash(ctx, hashOf("owner "+u.Email), now); err != nil {
				t.Errorf("the owner's session: %v, want it live", err)
			}
			if known, err := s.KnownDevice(ctx, u.Email, hashOf("device "+u.Email), now.Add(-time.Hour)); !known || err != nil {
				t.Errorf("the owner's device: known %v, %v; want it known", known, err)
			}
			if again, err := s.UserByEmail(ctx, u.Email); err != nil || again.SignOuts != u.SignOuts {
				t.Errorf("sign-outs %d, %v; want %d as before", again.SignOuts, err, u.SignOuts)
			}
		})
	}
}
