package auth_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestEndedSessionEndsNothing: a request of a session that is read just
// before the session ends (the owner changes the password, or ends it,
// from another browser) and acts just after acts on nothing: it ends no
// session, not the owner's that goes on under its new token, nor the
// others, and forgets no device. Otherwise whoever the owner changed the
// password against, sending requests in a loop, would still sign the
// owner out once the change had ended them.
func TestEndedSessionEndsNothing(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.NotifyNewDevice = false })
	login := func(email, ip string) auth.LoginResult {
		t.Helper()
		res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: email, Password: "password123", Client: client(ip)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	read := func(token string) auth.Session {
		t.Helper()
		sess, err := f.svc.Session(t.Context(), token)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}

	for i, c := range []struct {
		name string
		// end ends the thief's session from the owner's, and returns
		// the owner's token after it.
		end func(t *testing.T, owner, thief auth.LoginResult) string
	}{
		{"password changed", func(t *testing.T, owner, _ auth.LoginResult) string {
			rotated, err := f.svc.ChangePassword(t.Context(), auth.PasswordChange{Session: owner.Session.Token, Current: "password123",
				New: "a new one, nowhere leaked", Client: client("192.0.2.1"), DeviceCookie: owner.Device.Value})
			if err != nil {
				t.Fatal(err)
			}
			return rotated.Token
		}},
		{"session ended", func(t *testing.T, owner, thief auth.LoginResult) string {
			if _, err := f.svc.EndSession(t.Context(), read(owner.Session.Token), owner.Session.Token, thief.Session.PublicID, client("192.0.2.1")); err != nil {
				t.Fatal(err)
			}
			return owner.Session.Token
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			email := fmt.Sprintf("ann%d@example.com", i)
			f.addUser(t, email, "password123", false)
			owner := login(email, "192.0.2.1")
			list, err := f.svc.ListSessions(t.Context(), read(owner.Session.Token), client("192.0.2.1"))
			if err != nil || len(list.Devices) != 1 {
				t.Fatalf("the owner's devices: %+v, %v", list.Devices, err)
			}
			ownerDevice := list.Devices[0].PublicID
			thief := login(email, "192.0.2.66")
			stale := read(thief.Session.Token)

			ownerToken := c.end(t, owner, thief)
			if _, err := f.svc.Session(t.Context(), thief.Session.Token); !errors.Is(err, auth.ErrNoSession) {
				t.Fatalf("the thief's session after it was ended: %v", err)
			}
			ownerPublicID := read(ownerToken).PublicID

			if _, err := f.svc.EndSession(t.Context(), stale, thief.Session.Token, ownerPublicID, client("192.0.2.66")); !errors.Is(err, auth.ErrNoSession) {
				t.Errorf("the ended session ending the owner's: %v, want ErrNoSession", err)
			}
			if _, err := f.svc.EndOtherSessions(t.Context(), stale, thief.Session.Token, client("192.0.2.66")); !errors.Is(err, auth.ErrNoSession) {
				t.Errorf("the ended session ending the others: %v, want ErrNoSession", err)
			}
			if err := f.svc.ForgetDevice(t.Context(), stale, thief.Session.Token, ownerDevice, client("192.0.2.66")); !errors.Is(err, auth.ErrNoSession) {
				t.Errorf("the ended session forgetting the owner's device: %v, want ErrNoSession", err)
			}
			if _, err := f.svc.Session(t.Context(), ownerToken); err != nil {
				t.Errorf("the owner's session after the ended one's requests: %v, want it live", err)
			}
			if n := countRows(t, f, "SELECT count(*) FROM devices WHERE public_id = '"+ownerDevice+"'"); n != 1 {
				t.Errorf("the owner's device after the ended session's requests: %d rows, want it known", n)
			}
		})
	}
}
