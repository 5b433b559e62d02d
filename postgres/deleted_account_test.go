package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestDeletedAccountWritesNothing: each write made for a signed-in owner
// whose account was deleted meanwhile answers ErrNoUser, which the
// service turns into no session, rather than a foreign key's violation or
// a missing row, and leaves nothing behind; of a live account, an unknown
// session or device is still ErrNotListed.
func TestDeletedAccountWritesNothing(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	live := addUser(t, s, "live@example.com", false)
	gone := addUser(t, s, "gone@example.com", false)
	if _, err := s.DeleteUser(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	unknown := strings.Repeat("0", 32)
	now := time.Now()
	if err := s.CreateSession(ctx, hashOf("live"), auth.Session{UserID: live.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, live.PasswordHash, live.SignOuts); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession(ctx, live.ID, hashOf("live"), unknown); !errors.Is(err, auth.ErrNotListed) {
		t.Errorf("ending an unknown session of a live account: %v, want ErrNotListed", err)
	}
	if err := s.ForgetDevice(ctx, live.ID, hashOf("live"), unknown); !errors.Is(err, auth.ErrNotListed) {
		t.Errorf("forgetting an unknown device of a live account: %v, want ErrNotListed", err)
	}

	writes := map[string]func() error{
		"AddFactor": func() error {
			_, err := s.AddFactor(ctx, auth.Factor{UserID: gone.ID, Kind: auth.FactorTOTP, Name: "app", Secret: []byte("s"), CreatedAt: now})
			return err
		},
		"WebAuthnHandle": func() error { _, err := s.WebAuthnHandle(ctx, gone.ID, []byte("handle")); return err },
		"AddCeremony": func() error {
			return s.AddCeremony(ctx, auth.Ceremony{BindingHash: hashOf("gone"), Purpose: "register", UserID: gone.ID,
				Session: []byte("{}"), ExpiresAt: now.Add(time.Minute)})
		},
		"EndOtherSessions": func() error { _, err := s.EndOtherSessions(ctx, gone.ID, hashOf("kept")); return err },
		"EndSession":       func() error { return s.EndSession(ctx, gone.ID, hashOf("kept"), unknown) },
		"ForgetDevice":     func() error { return s.ForgetDevice(ctx, gone.ID, hashOf("kept"), unknown) },
		"ChangePassword": func() error {
			return s.ChangePassword(ctx, gone.ID, gone.PasswordHash, "new hash", hashOf("old"), hashOf("new"), nil)
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, auth.ErrNoUser) {
			t.Errorf("%s for a deleted account: %v, want ErrNoUser", name, err)
		}
	}
	for _, table := range []string{"users", "second_factors", "webauthn_ceremonies", "sessions"} {
		col := "user_id"
		if table == "users" {
			col = "id"
		}
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE `+col+` = $1`, gone.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows of %s for the deleted account", n, table)
		}
	}
}
