package auth_test

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// TestUnlockLinkRecordedWhenTheClientHangsUp: an unlock link spent as its
// client hangs up is spent as any other: the browser is made a known
// device and the confirmation is recorded, with the new device. Left on
// the request's context, the link would be used up with nothing recorded
// and the caller told the service was unavailable.
func TestUnlockLinkRecordedWhenTheClientHangsUp(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	if err := f.svc.RequestUnlock(t.Context(), "ann@example.com", client("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	token := onlyLink(t, f, "ann@example.com", unlockLinkRE)
	before := len(eventsOfKinds(t, f, auth.EventUnlockConfirmed, auth.EventNewDevice))
	var cookie auth.DeviceCookie
	err := hangUpAtCommit(t, f, "unlock_tokens", func(ctx context.Context) error {
		var err error
		cookie, err = f.svc.ConfirmUnlock(ctx, token, client("192.0.2.1"))
		return err
	})
	if err != nil {
		t.Errorf("ConfirmUnlock whose client hung up as it committed: %v; want it done", err)
	}
	if _, err := f.svc.ConfirmUnlock(t.Context(), token, client("192.0.2.1")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("the link again: %v; want ErrInvalidToken, spent", err)
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(eventsOfKinds(t, f, auth.EventUnlockConfirmed, auth.EventNewDevice)) - before; got != 2 {
		t.Errorf("%d events of the spent link, want 2 (confirmed, new device)", got)
	}
	if cookie.Value == "" {
		t.Fatal("no device cookie for the spent link")
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123",
		Client: client("192.0.2.1"), DeviceCookie: cookie.Value}); err != nil {
		t.Errorf("sign-in from the unlocked browser: %v", err)
	}
}

// TestSignInLinkRecordedWhenTheClientHangsUp: so is a sign-in link: the
// browser that spent it as its client hung up is a known device with a
// session, and the confirmation is recorded.
func TestSignInLinkRecordedWhenTheClientHangsUp(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.NewDeviceVerification = auth.VerifyAlways })
	f.addUser(t, "ann@example.com", "password123", false)
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")}); !errors.Is(err, auth.ErrVerificationRequired) {
		t.Fatalf("held sign-in: %v", err)
	}
	token := onlyLink(t, f, "ann@example.com", signInLink)
	before := len(eventsOfKinds(t, f, auth.EventVerificationConfirmed, auth.EventNewDevice))
	var res auth.LoginResult
	err := hangUpAtCommit(t, f, "sign_in_tokens", func(ctx context.Context) error {
		var err error
		res, err = f.svc.ConfirmSignIn(ctx, token, client("192.0.2.7"), "")
		return err
	})
	if err != nil {
		t.Errorf("ConfirmSignIn whose client hung up as it committed: %v; want it done", err)
	}
	if _, err := f.svc.ConfirmSignIn(t.Context(), token, client("192.0.2.7"), ""); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("the link again: %v; want ErrInvalidToken, spent", err)
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(eventsOfKinds(t, f, auth.EventVerificationConfirmed, auth.EventNewDevice)) - before; got != 2 {
		t.Errorf("%d events of the spent link, want 2 (confirmed, new device)", got)
	}
	if res.Session.Token == "" || res.Device.Value == "" {
		t.Fatalf("ConfirmSignIn = %+v; want a session and a device cookie", res)
	}
	if _, err := f.svc.Session(t.Context(), res.Session.Token); err != nil {
		t.Errorf("the link's session: %v", err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123",
		Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}); err != nil {
		t.Errorf("sign-in from the confirmed browser: %v", err)
	}
}

// TestNewDeviceRecordedWhenTheClientHangsUp: a sign-in whose new
// browser's device is stored as its client hangs up is finished and
// recorded as any other: the device is no known device of the account
// that its activity and its owner's notice leave out.
func TestNewDeviceRecordedWhenTheClientHangsUp(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	kinds := []string{auth.EventNewDevice, auth.EventLoginSucceeded}
	before := len(eventsOfKinds(t, f, kinds...))
	mailsBefore := len(mailsTo(t, f, "ann@example.com"))
	var res auth.LoginResult
	err := hangUpAtCommit(t, f, "devices", func(ctx context.Context) error {
		var err error
		res, err = f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
		return err
	})
	if err != nil {
		t.Errorf("Login whose client hung up as its device was stored: %v; want it done", err)
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(eventsOfKinds(t, f, kinds...)) - before; got != 2 {
		t.Errorf("%d events of the sign-in, want 2 (new device, signed in)", got)
	}
	if got := len(mailsTo(t, f, "ann@example.com")) - mailsBefore; got != 1 {
		t.Errorf("%d notices of the new device, want 1", got)
	}
	if _, err := f.svc.Session(t.Context(), res.Session.Token); err != nil {
		t.Errorf("the sign-in's session: %v", err)
	}
}

// TestRecoveryCodeRecordedWhenTheClientHangsUp: a recovery code spent as
// its client hangs up is recorded, and its second step finished, as any
// other: the account's owner is not left a code short with nothing to
// say which sign-in spent it. So is the code of a held answer's second
// step (mfa_held.go).
func TestRecoveryCodeRecordedWhenTheClientHangsUp(t *testing.T) {
	for _, held := range []bool{false, true} {
		name := "own step"
		if held {
			name = "held step"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *auth.Config) {
				if held {
					c.NewDeviceVerification = auth.VerifyAlways
				}
			})
			f.addUser(t, "ann@example.com", "password123", false)
			res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
			if held {
				if !errors.Is(err, auth.ErrVerificationRequired) {
					t.Fatalf("held sign-in: %v", err)
				}
				res, err = f.svc.ConfirmSignIn(t.Context(), signInLink.FindStringSubmatch(mailsTo(t, f, "ann@example.com")[0].Body)[1],
					client("192.0.2.7"), "")
			}
			if err != nil {
				t.Fatal(err)
			}
			_, codes := confirmTOTP(t, f, res)
			// Held: from another browser, which the account does not know.
			req := auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}
			want := auth.ErrMFARequired
			if held {
				req.DeviceCookie, want = "", auth.ErrVerificationRequired
			}
			step, err := f.svc.Login(t.Context(), req)
			if !errors.Is(err, want) || step.MFA.Token == "" {
				t.Fatalf("sign-in of an account with a factor: %v, %+v; want %v with a second step", err, step.MFA, want)
			}
			if err := f.svc.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			kinds := []string{auth.EventRecoveryCodeUsed, auth.EventLoginSucceeded}
			before := len(eventsOfKinds(t, f, kinds...))
			var signedIn auth.LoginResult
			err = hangUpAtCommit(t, f, "recovery_codes", func(ctx context.Context) error {
				var err error
				signedIn, err = f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding,
					Code: codes[0], Client: client("192.0.2.7"), Cookie: func(string) string { return req.DeviceCookie }})
				return err
			})
			if err != nil {
				t.Errorf("SecondStep whose client hung up as its recovery code was spent: %v; want it done", err)
			}
			if err := f.svc.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := len(eventsOfKinds(t, f, kinds...)) - before; got != 2 {
				t.Errorf("%d events of the second step, want 2 (recovery code used, signed in)", got)
			}
			if _, err := f.svc.Session(t.Context(), signedIn.Session.Token); err != nil {
				t.Errorf("the second step's session: %v", err)
			}
		})
	}
}

// TestPasskeyStepRecordedWhenTheClientHangsUp: so is a second step
// answered with a passkey whose counter is stored as its client hangs up:
// the sign-in is finished and recorded, not left with the passkey used
// and nothing to show for it.
func TestPasskeyStepRecordedWhenTheClientHangsUp(t *testing.T) {
	f := newFixture(t, nil)
	k := authtest.NewSoftKey(t)
	f.passkeyUser(t, "ona@example.com", k)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ona@example.com", Password: passkeyPassword, Client: client("192.0.2.10")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("password of an account with a passkey: %v, want ErrMFARequired", err)
	}
	req := f.secondStepAnswer(t, res.MFA, k, 1)
	signedInDespiteHangUp(t, f, "SecondStepPasskey", func(ctx context.Context) (auth.LoginResult, error) {
		return f.svc.SecondStepPasskey(ctx, req)
	})
}

// signedInDespiteHangUp runs signIn, named what, with its client hanging
// up as a passkey's counter is stored, and checks that it signed in all
// the same: no error, one sign-in recorded, and a session that works.
func signedInDespiteHangUp(t *testing.T, f *fixture, what string, signIn func(context.Context) (auth.LoginResult, error)) {
	t.Helper()
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := len(eventsOfKinds(t, f, auth.EventLoginSucceeded))
	var signedIn auth.LoginResult
	err := hangUpAtCommit(t, f, "second_factors", func(ctx context.Context) error {
		var err error
		signedIn, err = signIn(ctx)
		return err
	})
	if err != nil {
		t.Errorf("%s whose client hung up as its counter was stored: %v; want it done", what, err)
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(eventsOfKinds(t, f, auth.EventLoginSucceeded)) - before; got != 1 {
		t.Errorf("%s: %d sign-ins recorded, want 1", what, got)
	}
	if _, err := f.svc.Session(t.Context(), signedIn.Session.Token); err != nil {
		t.Errorf("%s: its session: %v", what, err)
	}
}

// TestPasskeyAloneRecordedWhenTheClientHangsUp: so is a sign-in with a
// passkey alone whose counter is stored as its client hangs up: the
// ceremony is spent and the counter moved on, so the sign-in is finished
// and recorded rather than left with neither a session nor an event,
// and counted by the attack detector as a failed sign-in.
func TestPasskeyAloneRecordedWhenTheClientHangsUp(t *testing.T) {
	f := newFixture(t, nil)
	k := authtest.NewSoftKey(t)
	u := f.passkeyUser(t, "hung-alone@example.com", k)
	c, err := f.svc.BeginPasskeySignIn(t.Context(), client("192.0.2.12"))
	if err != nil {
		t.Fatal(err)
	}
	req := auth.PasskeySignInRequest{Ceremony: c.Binding, Response: []byte(k.Get(t, optionsJSON(t, c), 1, nil)),
		Client: client("192.0.2.12"), Cookie: func(string) string { return "" }}
	signedInDespiteHangUp(t, f, "PasskeySignIn", func(ctx context.Context) (auth.LoginResult, error) {
		return f.svc.PasskeySignIn(ctx, req)
	})
	if got := f.signCount(t, u.ID); got != k.Count {
		t.Fatalf("stored counter %d, want %d: the hang-up came before the counter was stored", got, k.Count)
	}
}

// TestSecondStepIssuedRecordedWhenTheClientHangsUp: a second step stored
// as its client hangs up is recorded as any other: a right password of
// an account with a factor leaves no step behind that no security event
// shows.
func TestSecondStepIssuedRecordedWhenTheClientHangsUp(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	confirmTOTP(t, f, res)
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := len(eventsOfKinds(t, f, auth.EventMFARequired))
	var step auth.LoginResult
	err = hangUpAtCommit(t, f, "mfa_challenges", func(ctx context.Context) error {
		var err error
		step, err = f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123",
			Client: client("192.0.2.7"), DeviceCookie: res.Device.Value})
		return err
	})
	if !errors.Is(err, auth.ErrMFARequired) || step.MFA.Token == "" {
		t.Errorf("Login whose client hung up as its second step was stored: %v, %+v; want ErrMFARequired with the step", err, step.MFA)
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(eventsOfKinds(t, f, auth.EventMFARequired)) - before; got != 1 {
		t.Errorf("%d second steps recorded, want 1", got)
	}
}

// onlyLink returns the token of the link re finds in the one mail sent
// to to, once the events so far are written.
func onlyLink(t *testing.T, f *fixture, to string, re *regexp.Regexp) string {
	t.Helper()
	mails := mailsTo(t, f, to)
	if len(mails) != 1 {
		t.Fatalf("%d mails to %s, want 1", len(mails), to)
	}
	m := re.FindStringSubmatch(mails[0].Body)
	if m == nil {
		t.Fatalf("no link in:\n%s", mails[0].Body)
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m[1]
}

// TestSignInLinkKeepsItsDeviceWhenNoSessionIsMade: a sign-in link spent
// once Postgres fails to store the session (after the token's commit)
// answers unavailable but hands the browser the device it earned: the
// link works once, and the browser signs in with the password from then
// on rather than with a link it no longer has.
func TestSignInLinkKeepsItsDeviceWhenNoSessionIsMade(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.NewDeviceVerification = auth.VerifyAlways })
	f.addUser(t, "ann@example.com", "password123", false)
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")}); !errors.Is(err, auth.ErrVerificationRequired) {
		t.Fatalf("held sign-in: %v", err)
	}
	token := onlyLink(t, f, "ann@example.com", signInLink)
	// Sessions refused from now on, as a failing Postgres refuses them.
	if _, err := f.db.Exec(t.Context(), `ALTER TABLE sessions ADD CONSTRAINT sessions_refused CHECK (false) NOT VALID`); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.ConfirmSignIn(t.Context(), token, client("192.0.2.7"), "")
	if !errors.Is(err, auth.ErrUnavailable) || res.Device.Value == "" {
		t.Fatalf("ConfirmSignIn with no session stored: %+v, %v; want ErrUnavailable with the device cookie", res, err)
	}
	if _, err := f.db.Exec(t.Context(), `ALTER TABLE sessions DROP CONSTRAINT sessions_refused`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123",
		Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}); err != nil {
		t.Errorf("sign-in from the browser that spent the link: %v; want signed in as a known device", err)
	}
}
