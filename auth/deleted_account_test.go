package auth_test

import (
	"errors"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/postgres"
)

// TestDeletedAccountHasNoSession: an account deleted by another replica
// (or the command line) while one of its sessions is still in this
// replica's hands, read a moment before or remembered by the proxies'
// cache. Each request of the owner's made with that session answers as
// a signed-out one: ErrNoSession for what would write the account's rows,
// never ErrUnavailable from a foreign key or a missing row; what only
// reads finds nothing. Nothing of the account is written, and the
// session the cache remembered is dropped once found stale.
func TestDeletedAccountHasNoSession(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	// A clock that stands still, so that the cache's entry lapses only if
	// it is dropped.
	f.advance(0)
	const password = "password123"
	u := f.addUser(t, "dora@example.com", password, false)
	c := client("192.0.2.60")
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: u.Email, Password: password, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	token := res.Session.Token
	sess, err := f.svc.Session(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	list, err := f.svc.ListSessions(ctx, sess, c)
	if err != nil || len(list.Devices) != 1 {
		t.Fatalf("the account's lists before its deletion: %+v, %v", list, err)
	}
	device := list.Devices[0].PublicID
	pending, err := f.svc.BeginTOTP(ctx, sess, client("192.0.2.200"))
	if err != nil {
		t.Fatal(err)
	}
	ceremony, err := f.svc.BeginPasskey(ctx, sess, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ProxySession(ctx, token); err != nil {
		t.Fatal(err)
	}

	if _, err := postgres.New(f.db).DeleteUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ProxySession(ctx, token); err != nil {
		t.Fatalf("the deleted account's session before this replica heard of it: %v, want it still remembered", err)
	}

	ch := auth.FactorChange{Session: token, Password: password, Client: c, DeviceCookie: res.Device.Value}
	writes := []struct {
		name string
		call func() error
	}{
		{"BeginTOTP", func() error { _, err := f.svc.BeginTOTP(ctx, sess, client("192.0.2.200")); return err }},
		{"BeginPasskey", func() error { _, err := f.svc.BeginPasskey(ctx, sess, c); return err }},
		{"EndOtherSessions", func() error { _, err := f.svc.EndOtherSessions(ctx, sess, token, c); return err }},
		{"EndSession", func() error { _, err := f.svc.EndSession(ctx, sess, token, sess.PublicID, c); return err }},
		{"ForgetDevice", func() error { return f.svc.ForgetDevice(ctx, sess, token, device, c) }},
		{"ConfirmTOTP", func() error { _, err := f.svc.ConfirmTOTP(ctx, ch, pending.ID, "123456"); return err }},
		{"RemoveFactor", func() error { return f.svc.RemoveFactor(ctx, ch, pending.ID) }},
		{"RegenerateRecoveryCodes", func() error { _, err := f.svc.RegenerateRecoveryCodes(ctx, ch); return err }},
		{"FinishPasskey", func() error {
			_, err := f.svc.FinishPasskey(ctx, ch, ceremony.Binding, "Laptop", []byte(`{}`))
			return err
		}},
		{"ChangePassword", func() error {
			_, err := f.svc.ChangePassword(ctx, auth.PasswordChange{Session: token, Current: password,
				New: "another password 456", Client: c, DeviceCookie: res.Device.Value})
			return err
		}},
	}
	for i, w := range writes {
		if err := w.call(); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("%s with the deleted account's session: %v, want ErrNoSession", w.name, err)
		}
		if i == 0 {
			if _, err := f.svc.ProxySession(ctx, token); !errors.Is(err, auth.ErrNoSession) {
				t.Errorf("the cached session once found stale: %v, want ErrNoSession", err)
			}
		}
	}

	if list, err := f.svc.ListSessions(ctx, sess, c); err != nil || len(list.Sessions)+len(list.Devices) != 0 {
		t.Errorf("ListSessions with the deleted account's session: %+v, %v, want nothing", list, err)
	}
	if factors, left, err := f.svc.AccountFactors(ctx, sess); err != nil || len(factors) != 0 || left != 0 {
		t.Errorf("AccountFactors with the deleted account's session: %v, %d, %v, want nothing", factors, left, err)
	}
	if events, err := f.svc.Activity(ctx, sess, c, auth.ActivityCursor{}, 10); err != nil || len(events) != 0 {
		t.Errorf("Activity with the deleted account's session: %v, %v, want nothing", events, err)
	}
	if _, err := f.svc.PendingTOTP(ctx, sess, pending.ID); !errors.Is(err, auth.ErrNoFactor) {
		t.Errorf("PendingTOTP with the deleted account's session: %v, want ErrNoFactor", err)
	}

	// Nothing was written in the deleted account's name.
	for _, table := range []string{"users", "sessions", "devices", "second_factors", "recovery_codes", "webauthn_ceremonies",
		"mfa_challenges", "sign_in_tokens", "password_reset_tokens"} {
		col := "user_id"
		if table == "users" {
			col = "id"
		}
		var n int
		if err := f.db.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE `+col+` = $1`, u.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows of %s for the deleted account", n, table)
		}
	}
}
