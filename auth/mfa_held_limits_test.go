package auth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestHeldCodesCountTowardsTheOwnLock: whoever has the password gets no
// more guesses at the codes for being held. A held answer's codes, when
// its password was right, count towards the account's own lock as well
// as the held answers', so the own step's codes and theirs together are
// checked at most the threshold's number of times; once the own step is
// locked, a right password's held code is answered as a wrong password's
// is (checked, accepted never, ErrInvalidCode), not with the lock's 429,
// which would tell a stuffing run the password was right.
func TestHeldCodesCountTowardsTheOwnLock(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	res, secret, _ := heldInAttackMode(t, f)
	right := totpAt(t, secret, time.Now().Add(30*time.Second))
	wrong := wrongCode(right)
	limit := f.cfg.Limits[auth.RuleMFAAccount].Count
	held := func(password, ip string) auth.MFAStep {
		t.Helper()
		step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: password, Client: client(ip)})
		if !errors.Is(err, auth.ErrVerificationRequired) || step.MFA.Token == "" {
			t.Fatalf("sign-in from a new browser in attack mode: %v; want a held second step", err)
		}
		return step.MFA
	}
	answer := func(step auth.MFAStep, ip, code string) error {
		_, err := f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.Token, Binding: step.Binding, Code: code,
			Client: client(ip), Cookie: func(string) string { return "" }})
		return err
	}
	// The own step's codes, from the known browser, one short of the
	// threshold; then one held answer's.
	own, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7"),
		DeviceCookie: res.Device.Value})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("sign-in from the known browser: %v, want its second step", err)
	}
	for i := range limit - 1 {
		if err := answer(own.MFA, "192.0.2.7", wrong); !errors.Is(err, auth.ErrInvalidCode) {
			t.Fatalf("own step's wrong code %d: %v, want ErrInvalidCode", i+1, err)
		}
	}
	if err := answer(held("password123", "198.51.100.1"), "198.51.100.1", wrong); !errors.Is(err, auth.ErrInvalidCode) {
		t.Fatalf("a held answer's wrong code: %v, want ErrInvalidCode", err)
	}
	if err := answer(own.MFA, "192.0.2.7", right); !errors.Is(err, auth.ErrLimited) {
		t.Errorf("the own step's right code after %d of its wrong codes and a held answer's: %v, want ErrLimited", limit-1, err)
	}
	// A held answer of the right password and one of a wrong password
	// answer alike while it is.
	rightStep, wrongStep := held("password123", "203.0.113.1"), held("not the password", "203.0.113.2")
	errRight, errWrong := answer(rightStep, "203.0.113.1", right), answer(wrongStep, "203.0.113.2", right)
	if !errors.Is(errRight, auth.ErrInvalidCode) || !errors.Is(errWrong, auth.ErrInvalidCode) {
		t.Errorf("the right code on held answers with the own step locked: right password %v, wrong password %v; want ErrInvalidCode both", errRight, errWrong)
	}
}

// TestHeldCodesOfAReplacedPasswordCountTowardsNoOwner: a held token made
// with the right password counts towards the account's own lock only while
// that password is still the account's: whoever kept one after the owner
// replaced it cannot lock the owner's second step with it.
func TestHeldCodesOfAReplacedPasswordCountTowardsNoOwner(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	_, secret, _ := heldInAttackMode(t, f)
	right := totpAt(t, secret, time.Now().Add(30*time.Second))
	wrong := wrongCode(right)
	step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("198.51.100.1")})
	if !errors.Is(err, auth.ErrVerificationRequired) || step.MFA.Token == "" {
		t.Fatalf("sign-in from a new browser in attack mode: %v; want a held second step", err)
	}
	if err := f.svc.SetPassword(ctx, "ann@example.com", "a new password 456", "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.attack.SwitchAttack(ctx, false, "test"); err != nil {
		t.Fatal(err)
	}
	for i := range f.cfg.Limits[auth.RuleMFAAccount].Count {
		_, err := f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding, Code: wrong,
			Client: client("198.51.100.1"), Cookie: func(string) string { return "" }})
		if !errors.Is(err, auth.ErrInvalidCode) {
			t.Fatalf("the old password's held code %d: %v, want ErrInvalidCode", i+1, err)
		}
	}
	own, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "a new password 456", Client: client("203.0.113.9")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("sign-in with the new password: %v, want its second step", err)
	}
	if _, err := f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: own.MFA.Token, Binding: own.MFA.Binding, Code: right,
		Client: client("203.0.113.9"), Cookie: func(string) string { return "" }}); err != nil {
		t.Errorf("the owner's right code after the old password's held codes: %v, want signed in", err)
	}
}
