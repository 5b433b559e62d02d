package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestTOTPEnrolmentTakesTheCodeAsTyped: the first code of an authenticator
// app confirms it typed as the app shows it ("123 456") or pasted with
// spaces around it, as the second step takes it; before, the page said
// the right code was wrong.
func TestTOTPEnrolmentTakesTheCodeAsTyped(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	c := client("192.0.2.7")
	for i, typed := range []func(code string) string{
		func(code string) string { return code[:3] + " " + code[3:] },
		func(code string) string { return " " + code + "\n" },
	} {
		email := []string{"ann@example.com", "bob@example.com"}[i]
		f.addUser(t, email, "password123", false)
		res, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: "password123", Client: c})
		if err != nil {
			t.Fatal(err)
		}
		enrol, err := f.svc.BeginTOTP(ctx, res.Session, client("192.0.2.200"))
		if err != nil {
			t.Fatal(err)
		}
		ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: c, DeviceCookie: res.Device.Value}
		code := typed(totpAt(t, enrol.Secret, time.Now()))
		if codes, err := f.svc.ConfirmTOTP(ctx, ch, enrol.ID, code); err != nil || len(codes) != auth.RecoveryCodes {
			t.Errorf("the first code typed as %q: %d recovery codes, %v; want the factor confirmed", code, len(codes), err)
		}
	}
}

// TestFactorConfirmedBesideTheLastRemovalGetsCodes: an authenticator app
// confirmed while the account's only other factor is being removed (from
// another tab) becomes its only factor: it gets recovery codes, shown
// once, whatever the account held when the confirmation began. Before,
// the codes were drawn only if the account had no factor when it began,
// and the app was left the account's only factor without any.
func TestFactorConfirmedBesideTheLastRemovalGetsCodes(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	c := client("192.0.2.7")
	const email = "ann@example.com"
	u := f.addUser(t, email, "password123", false)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: "password123", Client: c})
	if err != nil {
		t.Fatal(err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: c, DeviceCookie: res.Device.Value}
	first, err := f.svc.BeginTOTP(ctx, res.Session, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ConfirmTOTP(ctx, ch, first.ID, totpAt(t, first.Secret, time.Now())); err != nil {
		t.Fatal(err)
	}
	second, err := f.svc.BeginTOTP(ctx, res.Session, c)
	if err != nil {
		t.Fatal(err)
	}
	// The removal of the first app, held open with the account's row, as
	// RemoveFactors holds it.
	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	for _, q := range []string{
		`SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE`,
		`DELETE FROM second_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL`,
		`DELETE FROM recovery_codes WHERE user_id = $1`,
	} {
		if _, err := tx.Exec(ctx, q, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	type confirmed struct {
		codes []string
		err   error
	}
	done := make(chan confirmed, 1)
	go func() {
		codes, err := f.svc.ConfirmTOTP(ctx, ch, second.ID, totpAt(t, second.Secret, time.Now()))
		done <- confirmed{codes, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting bool
		// The confirmation's lock of the account's row (lockForFirstFactor).
		if err := f.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%sign_outs%FOR NO KEY UPDATE%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the confirmation never waited for the removal")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	var left int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM recovery_codes WHERE user_id = $1 AND used_at IS NULL`, u.ID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if len(got.codes) != auth.RecoveryCodes || left != auth.RecoveryCodes {
		t.Errorf("the account's only factor, confirmed beside the other's removal: %d codes shown, %d kept; want %d",
			len(got.codes), left, auth.RecoveryCodes)
	}
}
