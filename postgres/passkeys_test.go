package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	id, _, err := s.AddPasskey(ctx, auth.Passkey{UserID: u.ID, Name: "key", CredentialID: []byte("credential"), PublicKey: []byte("k")}, nil, at, verified(u))
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
	tx := holdRows(t, s, `UPDATE users SET password_hash = 'new' WHERE id = $1`, u.ID)
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

// TestFactorAfterNewPassword: a factor set up by whoever checked the old
// password, or from a session signed out everywhere, is neither stored
// nor confirmed once the new password or the sign-out is: a passkey
// stored then would sign in alone after the new password.
func TestFactorAfterNewPassword(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, change := range []string{"password", "sign-out"} {
		u, err := s.CreateUser(ctx, change+"@example.com", "old", false)
		if err != nil {
			t.Fatal(err)
		}
		totp, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "app", Secret: []byte("k"), CreatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		if change == "password" {
			_, err = s.SetPassword(ctx, u.Email, "new")
		} else {
			_, err = s.Pool().Exec(ctx, `UPDATE users SET sign_outs = sign_outs + 1 WHERE id = $1`, u.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		p := auth.Passkey{UserID: u.ID, Name: "key", CredentialID: []byte(change), PublicKey: []byte("k")}
		if _, _, err := s.AddPasskey(ctx, p, [][]byte{hashOf("code")}, at, verified(u)); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Errorf("after the %s, a passkey registered before it: %v, want ErrPasswordChanged", change, err)
		}
		if _, err := s.ConfirmFactor(ctx, u.ID, totp, 1, [][]byte{hashOf("code")}, at, verified(u)); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Errorf("after the %s, a TOTP factor set up before it: %v, want ErrPasswordChanged", change, err)
		}
		if keys, err := s.Passkeys(ctx, u.ID); err != nil || len(keys) != 0 {
			t.Errorf("after the %s: passkeys %d, %v; want none", change, len(keys), err)
		}
	}
}

// TestFactorsPerAccountBounded: an account holds at most auth.MaxFactors
// confirmed factors, passkeys and authenticator apps together, decided
// under its row's lock, so that no number of registrations at once passes
// the bound: each lists its passkeys in every second step's options and
// every registration's exclusions.
func TestFactorsPerAccountBounded(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	u, err := s.CreateUser(ctx, "una@example.com", "hash", false)
	if err != nil {
		t.Fatal(err)
	}
	add := func(i int) error {
		_, _, err := s.AddPasskey(ctx, auth.Passkey{UserID: u.ID, Name: "key", CredentialID: fmt.Appendf(nil, "credential %d", i),
			PublicKey: []byte("k")}, nil, at, verified(u))
		return err
	}
	errs := make(chan error, auth.MaxFactors+5)
	var wg sync.WaitGroup
	for i := range auth.MaxFactors + 5 {
		wg.Go(func() { errs <- add(i) })
	}
	wg.Wait()
	close(errs)
	stored, refused := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			stored++
		case errors.Is(err, auth.ErrTooManyFactors):
			refused++
		default:
			t.Fatal(err)
		}
	}
	if stored != auth.MaxFactors || refused != 5 {
		t.Errorf("%d registrations at once: %d stored, %d refused; want %d and 5", auth.MaxFactors+5, stored, refused, auth.MaxFactors)
	}
	// A factor that is not there is not there, bound or not.
	if _, err := s.ConfirmFactor(ctx, u.ID, 1<<40, 1, nil, at, verified(u)); !errors.Is(err, auth.ErrNoFactor) {
		t.Errorf("confirming no factor at the bound: %v, want ErrNoFactor", err)
	}
	// An authenticator app is refused too, once confirmed; it may be begun.
	id, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "app", Secret: []byte("k"), CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfirmFactor(ctx, u.ID, id, 1, nil, at, verified(u)); !errors.Is(err, auth.ErrTooManyFactors) {
		t.Errorf("confirming an app past the bound: %v, want ErrTooManyFactors", err)
	}
}

// TestAddCeremonyNeverWaitsOnExpiredOnes: a ceremony begun while another
// transaction holds an expired one (a sweep, or another begin) is stored
// at once, and the janitor's sweep removes the expired ones later. Each
// begin used to delete every expired ceremony first, so under a flood of
// begins each waited on the others' deletes.
func TestAddCeremonyNeverWaitsOnExpiredOnes(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ceremony := func(name string, expires time.Time) auth.Ceremony {
		return auth.Ceremony{BindingHash: hashOf(name), Purpose: "passkey", Session: []byte("{}"), ExpiresAt: expires}
	}
	if err := s.AddCeremony(ctx, ceremony("expired", at.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	holder := holdRows(t, s, `SELECT 1 FROM webauthn_ceremonies WHERE binding_hash = $1 FOR UPDATE`, hashOf("expired"))
	later := at.Add(time.Hour)
	// A wait on the held row would last until the rollback below: thirty
	// seconds tell it from an insert that a loaded machine kept late.
	waited, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.AddCeremony(waited, ceremony("new", later.Add(time.Minute))); err != nil {
		t.Fatalf("a ceremony begun while an expired one is held: %v", err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeCeremony(ctx, hashOf("expired"), "passkey", later); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("the expired ceremony taken: %v, want ErrInvalidToken", err)
	}
	if n, err := s.Sweep(ctx, auth.SweepCeremonies, later); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want the expired ceremony removed", n, err)
	}
	if _, err := s.TakeCeremony(ctx, hashOf("new"), "passkey", later); err != nil {
		t.Fatalf("the new ceremony after the sweep: %v", err)
	}
}
