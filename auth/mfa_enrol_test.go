package auth_test

import (
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
