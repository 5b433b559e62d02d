package auth_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestAdminRemovesConfirmedFactorsOnly: an administrator's removal of an
// account's factors counts, records and mails the factors its owner had,
// not a key the owner began to set up and never confirmed: an account with
// such a key alone had no factor to remove, and its owner is not told
// that an administrator removed every one.
func TestAdminRemovesConfirmedFactorsOnly(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: ann.Email, Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	// A key set up and left unconfirmed.
	if _, err := f.svc.BeginTOTP(ctx, res.Session); err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.RemoveFactors(ctx, "admin:root@example.com", ann.Email); err != nil || n != 0 {
		t.Errorf("removing an account's factors when it has an unconfirmed key alone: %d, %v; want 0 removed", n, err)
	}
	// A confirmed one beside another left unconfirmed.
	enrol, err := f.svc.BeginTOTP(ctx, res.Session)
	if err != nil {
		t.Fatal(err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}
	if _, err := f.svc.ConfirmTOTP(ctx, ch, enrol.ID, totpAt(t, enrol.Secret, time.Now())); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.BeginTOTP(ctx, res.Session); err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.RemoveFactors(ctx, "admin:root@example.com", ann.Email); err != nil || n != 1 {
		t.Errorf("removing an account's one factor, another being set up: %d, %v; want 1 removed", n, err)
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	events := eventsOfKinds(t, f, auth.EventFactorRemoved)
	if len(events) != 1 || !strings.Contains(events[0].detail, `"count": "1"`) {
		t.Errorf("factor_removed events: %+v; want one, of 1 factor", events)
	}
}

// TestAdminUnlockEndsTheSecondStepLock: an administrator's unlock ends the
// lock of the account's second step as well as its password's lockout,
// so that an owner who mistyped their codes is not left waiting up to a
// day for a lock that "user unlock" called "not locked".
func TestAdminUnlockEndsTheSecondStepLock(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleMFAAccount, 1) })
	ctx := t.Context()
	secret := enrolTOTP(t, f, "ann@example.com")
	step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("sign-in with a factor: %v, want ErrMFARequired", err)
	}
	answer := func(code string) error {
		_, err := f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding, Code: code,
			Client: client("192.0.2.7"), Cookie: func(string) string { return "" }})
		return err
	}
	// The next time step's code: this one's confirmed the factor.
	right := totpAt(t, secret, time.Now().Add(30*time.Second))
	wrong := fmt.Sprintf("%06d", (atoi(right)+500_000)%1_000_000)
	if err := answer(wrong); !errors.Is(err, auth.ErrInvalidCode) {
		t.Fatalf("a wrong code: %v, want ErrInvalidCode", err)
	}
	if err := answer(right); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("the right code after the lock: %v, want ErrLimited", err)
	}
	if was, err := f.svc.Unlock(ctx, "ann@example.com", "cli"); err != nil || !was {
		t.Fatalf("Unlock of a locked second step: %v, %v; want it reported locked", was, err)
	}
	if err := answer(right); err != nil {
		t.Fatalf("the right code after the unlock: %v, want a session", err)
	}
	if was, err := f.svc.Unlock(ctx, "ann@example.com", "cli"); err != nil || was {
		t.Errorf("Unlock of an account with nothing locked: %v, %v; want it reported not locked", was, err)
	}
}
