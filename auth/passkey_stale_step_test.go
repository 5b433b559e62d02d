package auth_test

import (
	"errors"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// TestStaleStepAfterNewPassword: a second step begun with the old
// password and answered after a new one (a reset, an operator's, the
// owner's change) signs nothing in, shows no passkey options, and does
// not let the passkey that answers it sign in alone again. Whoever kept
// a step open with the old password, and registered a passkey of their
// own while they had the account, would otherwise be back in with it.
func TestStaleStepAfterNewPassword(t *testing.T) {
	const fresh = "the owner's brand new password"
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, f *fixture, email string, k *authtest.SoftKey)
	}{
		{"reset", func(t *testing.T, f *fixture, email string, _ *authtest.SoftKey) {
			token := requestResetToken(t, f, email)
			if err := f.svc.ConfirmReset(t.Context(), token, fresh, client("192.0.2.91")); err != nil {
				t.Fatal(err)
			}
		}},
		{"operator", func(t *testing.T, f *fixture, email string, _ *authtest.SoftKey) {
			if err := f.svc.SetPassword(t.Context(), email, fresh, "cli"); err != nil {
				t.Fatal(err)
			}
		}},
		{"owner", func(t *testing.T, f *fixture, email string, k *authtest.SoftKey) {
			// The owner signs in with the password and the passkey, and
			// changes the password from that session.
			res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: email, Password: passkeyPassword, Client: client("192.0.2.10")})
			if !errors.Is(err, auth.ErrMFARequired) {
				t.Fatalf("the owner's sign-in: %v", err)
			}
			in, err := f.svc.SecondStepPasskey(t.Context(), f.secondStepAnswer(t, res.MFA, k, 2))
			if err != nil {
				t.Fatalf("the owner's second step: %v", err)
			}
			if _, err := f.svc.ChangePassword(t.Context(), auth.PasswordChange{Session: in.Session.Token, Current: passkeyPassword,
				New: fresh, Client: client("192.0.2.10"), DeviceCookie: in.Device.Value}); err != nil {
				t.Fatalf("ChangePassword: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			ctx := t.Context()
			const email = "victim@example.com"
			k := authtest.NewSoftKey(t)
			f.passkeyUser(t, email, k)
			res, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: passkeyPassword, Client: client("192.0.2.90")})
			if !errors.Is(err, auth.ErrMFARequired) {
				t.Fatalf("the old password: %v", err)
			}
			stale := res.MFA
			// Its ceremony begun while the step was live.
			c, err := f.svc.BeginSecondStepPasskey(ctx, stale.Token, stale.Binding, client("192.0.2.90"))
			if err != nil {
				t.Fatalf("BeginSecondStepPasskey while live: %v", err)
			}

			tc.change(t, f, email, k)

			if _, err := f.svc.BeginSecondStepPasskey(ctx, stale.Token, stale.Binding, client("192.0.2.90")); !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("the stale step's passkey options: %v, want ErrInvalidToken", err)
			}
			answer := auth.PasskeyStepRequest{Token: stale.Token, Binding: stale.Binding, Ceremony: c.Binding,
				Response: []byte(k.Get(t, optionsJSON(t, c), 10, nil)), Client: client("192.0.2.90"), Cookie: func(string) string { return "" }}
			if _, err := f.svc.SecondStepPasskey(ctx, answer); !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("the stale step answered with the passkey: %v, want ErrInvalidToken", err)
			}
			if _, err := f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: stale.Token, Binding: stale.Binding, Code: "123456",
				Client: client("192.0.2.90"), Cookie: func(string) string { return "" }}); !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("the stale step answered with a code: %v, want ErrInvalidToken", err)
			}
			if err := f.passkeyAlone(t, "192.0.2.93", func(o string) string { return k.Get(t, o, 11, nil) }); !errors.Is(err, auth.ErrPasskeyNeedsPassword) {
				t.Errorf("the passkey alone after the stale step: %v, want ErrPasskeyNeedsPassword", err)
			}
		})
	}
}
