package postgres_test

import (
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestUsePasskeyAfterNewPassword: a passkey that answers a second step
// signs in alone again only if the password that step verified is still
// the account's, and a new password stored at the same moment is either
// wholly before that use, and keeps the passkey from signing in alone,
// or wholly after it, and stops it.
func TestUsePasskeyAfterNewPassword(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	u, err := s.CreateUser(ctx, "tess@example.com", "old", false)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := s.AddPasskey(ctx, auth.Passkey{UserID: u.ID, Name: "key", CredentialID: []byte("credential"), PublicKey: []byte("k")}, nil, at)
	if err != nil {
		t.Fatal(err)
	}
	alone := func() bool {
		t.Helper()
		keys, err := s.Passkeys(ctx, u.ID)
		if err != nil || len(keys) != 1 {
			t.Fatalf("Passkeys: %v %v", keys, err)
		}
		return keys[0].SignsInAlone
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE second_factors SET signs_in_alone = false WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if used, err := s.UsePasskey(ctx, id, 1, false, "stale", at); err != nil || !used {
		t.Fatalf("after another password: %v %v, want its counter recorded", used, err)
	}
	if alone() {
		t.Error("a passkey used after a password that is no longer the account's signs in alone")
	}
	if used, err := s.UsePasskey(ctx, id, 2, false, "old", at); err != nil || !used || !alone() {
		t.Fatalf("after the account's password: %v %v, signs in alone %v; want both", used, err, alone())
	}

	// A new password being stored, as a reset does (the account's row,
	// then its passkeys), not yet committed while the passkey is used.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE users SET password_hash = 'new' WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE second_factors SET signs_in_alone = false WHERE user_id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.UsePasskey(ctx, id, 3, false, "old", at)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the use did not wait for the new password: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if alone() {
		t.Error("a passkey used with the old password as a new one was stored signs in alone after it")
	}
}
