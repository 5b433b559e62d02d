package auth_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/ratelimit"
)

const passkeyPassword = "correct horse battery"

// optionsJSON is a ceremony's options as the browser gets them.
func optionsJSON(t *testing.T, c auth.PasskeyCeremony) string {
	t.Helper()
	b, err := json.Marshal(c.Options)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// passkeyUser makes an account, signs it in from a browser of its own and
// registers k for it, as the account page does.
func (f *fixture) passkeyUser(t *testing.T, email string, k *authtest.SoftKey) auth.User {
	t.Helper()
	ctx := t.Context()
	u := f.addUser(t, email, passkeyPassword, false)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: passkeyPassword, Client: client("192.0.2.10")})
	if err != nil {
		t.Fatalf("sign-in before registration: %v", err)
	}
	c, err := f.svc.BeginPasskey(ctx, res.Session, client("192.0.2.10"))
	if err != nil {
		t.Fatalf("BeginPasskey: %v", err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: passkeyPassword, Client: client("192.0.2.10"), DeviceCookie: res.Device.Value}
	codes, err := f.svc.FinishPasskey(ctx, ch, c.Binding, "Laptop", []byte(k.Create(t, optionsJSON(t, c))))
	if err != nil || len(codes) != auth.RecoveryCodes {
		t.Fatalf("FinishPasskey: %d codes, %v", len(codes), err)
	}
	// The registration's ceremony is spent.
	if _, err := f.svc.FinishPasskey(ctx, ch, c.Binding, "Again", []byte(k.Create(t, optionsJSON(t, c)))); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("the registration's ceremony again: %v, want ErrInvalidToken", err)
	}
	return u
}

// passkeyAlone begins a passwordless sign-in from ip and answers it with
// the assertion make gives for its options.
func (f *fixture) passkeyAlone(t *testing.T, ip string, make func(options string) string) error {
	t.Helper()
	c, err := f.svc.BeginPasskeySignIn(t.Context(), client(ip))
	if err != nil {
		t.Fatalf("BeginPasskeySignIn: %v", err)
	}
	_, err = f.svc.PasskeySignIn(t.Context(), auth.PasskeySignInRequest{Ceremony: c.Binding,
		Response: []byte(make(optionsJSON(t, c))), Client: client(ip), Cookie: func(string) string { return "" }})
	return err
}

// signCount reads the stored counter of the account's passkeys.
func (f *fixture) signCount(t *testing.T, userID int64) uint32 {
	t.Helper()
	var n int64
	if err := f.db.QueryRow(t.Context(), `SELECT sign_count FROM second_factors WHERE user_id = $1 AND kind = 'webauthn'`, userID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return uint32(n)
}

// TestPasskeyCeremonyOnce: a ceremony's challenge is answered once, and
// only under the binding of the browser that began it.
func TestPasskeyCeremonyOnce(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	k := authtest.NewSoftKey(t)
	f.passkeyUser(t, "ona@example.com", k)

	mine, err := f.svc.BeginPasskeySignIn(ctx, client("192.0.2.20"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := f.svc.BeginPasskeySignIn(ctx, client("192.0.2.21"))
	if err != nil {
		t.Fatal(err)
	}
	answer := []byte(k.Get(t, optionsJSON(t, mine), 1, nil))
	signIn := func(binding string) error {
		_, err := f.svc.PasskeySignIn(ctx, auth.PasskeySignInRequest{Ceremony: binding, Response: answer,
			Client: client("192.0.2.20"), Cookie: func(string) string { return "" }})
		return err
	}
	// Under another browser's binding, the answer is to the wrong
	// challenge; under none, there is no ceremony.
	if err := signIn(theirs.Binding); !errors.Is(err, auth.ErrInvalidPasskey) {
		t.Errorf("an answer under another browser's ceremony: %v, want ErrInvalidPasskey", err)
	}
	if err := signIn(""); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("an answer without a ceremony: %v, want ErrInvalidToken", err)
	}
	if err := signIn(mine.Binding); err != nil {
		t.Fatalf("the answer under its own ceremony: %v", err)
	}
	if err := signIn(mine.Binding); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("the same ceremony again: %v, want ErrInvalidToken", err)
	}
	// The other browser's ceremony was spent by the wrong answer too.
	if err := signIn(theirs.Binding); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("a ceremony answered wrongly, again: %v, want ErrInvalidToken", err)
	}
}

// TestPasskeySecondStepBinding: the second step's passkey ceremony belongs
// to the browser that typed the password: another browser with the token
// gets no options, and an answer with another browser's step is refused.
func TestPasskeySecondStepBinding(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	k := authtest.NewSoftKey(t)
	f.passkeyUser(t, "sten@example.com", k)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "sten@example.com", Password: passkeyPassword, Client: client("192.0.2.30")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("password of an account with a passkey: %v, want ErrMFARequired", err)
	}
	other, err := f.svc.Login(ctx, auth.LoginRequest{Email: "sten@example.com", Password: passkeyPassword, Client: client("192.0.2.31")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatal(err)
	}
	if _, err := f.svc.BeginSecondStepPasskey(ctx, res.MFA.Token, other.MFA.Binding, client("192.0.2.10")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("options for a token under another browser's binding: %v, want ErrInvalidToken", err)
	}
	c, err := f.svc.BeginSecondStepPasskey(ctx, res.MFA.Token, res.MFA.Binding, client("192.0.2.10"))
	if err != nil {
		t.Fatal(err)
	}
	step := func(token, binding string) error {
		_, err := f.svc.SecondStepPasskey(ctx, auth.PasskeyStepRequest{Token: token, Binding: binding, Ceremony: c.Binding,
			Response: []byte(k.Get(t, optionsJSON(t, c), 1, nil)), Client: client("192.0.2.30"), Cookie: func(string) string { return "" }})
		return err
	}
	if err := step(res.MFA.Token, other.MFA.Binding); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("the answer with another browser's binding: %v, want ErrInvalidToken", err)
	}
	// Another browser's step, its own token and binding, with this
	// browser's ceremony: the ceremony is not that step's.
	if err := step(other.MFA.Token, other.MFA.Binding); !errors.Is(err, auth.ErrInvalidPasskey) {
		t.Errorf("the answer to one step's ceremony for another step: %v, want ErrInvalidPasskey", err)
	}
}

// TestPasskeyAloneNeedsUserVerification: a passkey alone signs in only
// with an answer that verified its user (a PIN, a fingerprint): a key
// that only tests presence is something held, one factor, and signs in
// only as the second step after the password. The options ask the
// browser for verification.
func TestPasskeyAloneNeedsUserVerification(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	k := authtest.NewSoftKey(t)
	k.PresenceOnly = true
	f.passkeyUser(t, "una@example.com", k)

	c, err := f.svc.BeginPasskeySignIn(ctx, client("192.0.2.70"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		PublicKey struct {
			UserVerification string `json:"userVerification"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(optionsJSON(t, c)), &o); err != nil || o.PublicKey.UserVerification != "required" {
		t.Errorf("passwordless options ask userVerification %q (%v), want required", o.PublicKey.UserVerification, err)
	}
	if err := f.passkeyAlone(t, "192.0.2.70", func(o string) string { return k.Get(t, o, 1, nil) }); !errors.Is(err, auth.ErrInvalidPasskey) {
		t.Errorf("a passkey alone, its user not verified: %v, want ErrInvalidPasskey", err)
	}

	// After the password it is the second factor, as registered.
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "una@example.com", Password: passkeyPassword, Client: client("192.0.2.71")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("password of an account with a passkey: %v, want ErrMFARequired", err)
	}
	if _, err := f.svc.SecondStepPasskey(ctx, f.secondStepAnswer(t, res.MFA, k, 1)); err != nil {
		t.Errorf("the same key as the second step: %v", err)
	}

	// A key that verifies its user signs in alone.
	v := authtest.NewSoftKey(t)
	f.passkeyUser(t, "vera@example.com", v)
	if err := f.passkeyAlone(t, "192.0.2.72", func(o string) string { return v.Get(t, o, 1, nil) }); err != nil {
		t.Errorf("a passkey alone, its user verified: %v", err)
	}
}

// TestPasskeyCounterBack: an assertion whose counter goes back is refused
// and recorded, and the stored counter stays where it was.
func TestPasskeyCounterBack(t *testing.T) {
	f := newFixture(t, nil)
	k := authtest.NewSoftKey(t)
	u := f.passkeyUser(t, "cora@example.com", k)
	if err := f.passkeyAlone(t, "192.0.2.40", func(o string) string { return k.Get(t, o, 5, nil) }); err != nil {
		t.Fatalf("counter moved on: %v", err)
	}
	if got := f.signCount(t, u.ID); got != 5 {
		t.Fatalf("stored counter %d, want 5", got)
	}
	if err := f.passkeyAlone(t, "192.0.2.40", func(o string) string { return k.Get(t, o, -2, nil) }); !errors.Is(err, auth.ErrInvalidPasskey) {
		t.Fatalf("counter gone back: %v, want ErrInvalidPasskey", err)
	}
	if got := f.signCount(t, u.ID); got != 5 {
		t.Errorf("stored counter %d after a counter gone back, want 5", got)
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := f.db.QueryRow(t.Context(), `SELECT count(*) FROM security_events WHERE kind = $1 AND user_id = $2`, auth.EventPasskeyCloned, u.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d counter regressions recorded (%v), want 1", n, err)
	}
}

// TestPasskeyRefusedAlike: a removed passkey, and the passkey of a
// disabled account, are refused as an unknown credential is.
func TestPasskeyRefusedAlike(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	removed, disabled := authtest.NewSoftKey(t), authtest.NewSoftKey(t)
	ru := f.passkeyUser(t, "remy@example.com", removed)
	du := f.passkeyUser(t, "dina@example.com", disabled)

	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "remy@example.com", Password: passkeyPassword, Client: client("192.0.2.10")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("sign-in: %v", err)
	}
	if res, err = f.svc.SecondStepPasskey(ctx, f.secondStepAnswer(t, res.MFA, removed, 1)); err != nil {
		t.Fatalf("second step with the passkey: %v", err)
	}
	factors, _, err := f.svc.UserFactors(ctx, ru.ID)
	if err != nil || len(factors) != 1 {
		t.Fatalf("factors: %v %v", factors, err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: passkeyPassword, Client: client("192.0.2.10"), DeviceCookie: res.Device.Value}
	if err := f.svc.RemoveFactor(ctx, ch, factors[0].ID); err != nil {
		t.Fatalf("RemoveFactor: %v", err)
	}
	if _, err := f.svc.DisableUser(ctx, du.ID, "admin:root@example.com"); err != nil {
		t.Fatal(err)
	}

	unknown := f.passkeyAlone(t, "192.0.2.50", func(o string) string { return authtest.NewSoftKey(t).Get(t, o, 1, nil) })
	if !errors.Is(unknown, auth.ErrInvalidPasskey) {
		t.Fatalf("an unknown credential: %v, want ErrInvalidPasskey", unknown)
	}
	for name, k := range map[string]*authtest.SoftKey{"removed passkey": removed, "disabled account's passkey": disabled} {
		err := f.passkeyAlone(t, "192.0.2.51", func(o string) string { return k.Get(t, o, 1, nil) })
		if !errors.Is(err, auth.ErrInvalidPasskey) || err.Error() != unknown.Error() {
			t.Errorf("%s: %v, want %v as for an unknown credential", name, err, unknown)
		}
	}
}

// secondStepAnswer begins the passkey ceremony of step and answers it
// with k, its counter at count.
func (f *fixture) secondStepAnswer(t *testing.T, step auth.MFAStep, k *authtest.SoftKey, count int) auth.PasskeyStepRequest {
	t.Helper()
	c, err := f.svc.BeginSecondStepPasskey(t.Context(), step.Token, step.Binding, client("192.0.2.10"))
	if err != nil {
		t.Fatalf("BeginSecondStepPasskey: %v", err)
	}
	return auth.PasskeyStepRequest{Token: step.Token, Binding: step.Binding, Ceremony: c.Binding,
		Response: []byte(k.Get(t, optionsJSON(t, c), count, nil)), Client: client("192.0.2.10"), Cookie: func(string) string { return "" }}
}

// TestMFANetworkIsARate: mfa_ip is a rate, its setting's count per
// window, right answers counted with wrong ones: a network whose users
// pass their second steps below it is never refused however long they
// go on (an office behind one address), and one past it is refused until
// the window frees a place, not locked for longer and longer.
func TestMFANetworkIsARate(t *testing.T) {
	const window = 400 * time.Millisecond
	f := newFixture(t, func(cfg *auth.Config) {
		cfg.Limits[auth.RuleMFANetwork] = ratelimit.Limit{Count: 3, Window: window}
	})
	k := authtest.NewSoftKey(t)
	f.passkeyUser(t, "otto@example.com", k)
	right := func(o string) string { return k.Get(t, o, 1, nil) }
	unknown := func(o string) string { return authtest.NewSoftKey(t).Get(t, o, 1, nil) }

	// Two a window, eight windows' worth: never more than the limit in
	// any window.
	for i := range 8 {
		if err := f.passkeyAlone(t, "203.0.113.90", right); err != nil {
			t.Fatalf("sign-in %d, two a window: %v", i+1, err)
		}
		time.Sleep(window/2 + 10*time.Millisecond)
	}

	// Past it: refused until the oldest leaves the window, then not. The
	// four must fall in one window: where a loaded machine took longer,
	// the first had left it, and the round goes again from another
	// address.
	time.Sleep(window)
	for round := range 5 {
		addr := fmt.Sprintf("203.0.113.%d", 91+round)
		began := time.Now()
		for i := range 3 {
			if err := f.passkeyAlone(t, addr, unknown); !errors.Is(err, auth.ErrInvalidPasskey) {
				t.Fatalf("unknown credential %d: %v", i+1, err)
			}
		}
		err := f.passkeyAlone(t, addr, right)
		if err == nil && time.Since(began) > window && round < 4 {
			continue
		}
		var l *auth.LimitedError
		if !errors.As(err, &l) || l.RetryAfter <= 0 || l.RetryAfter > window {
			t.Fatalf("the fourth in a window: %v, want refused for at most %s", err, window)
		}
		time.Sleep(l.RetryAfter)
		if err := f.passkeyAlone(t, addr, right); err != nil {
			t.Errorf("after its Retry-After: %v", err)
		}
		return
	}
}

// TestPasskeyCountedBeforeVerified: passwordless assertions count towards
// the second step's limits before their signature is checked: an unknown
// credential by mfa_ip alone, a known one by mfa_account too; past either,
// the right passkey is refused unverified, its counter left as it was.
func TestPasskeyCountedBeforeVerified(t *testing.T) {
	f := newFixture(t, nil)
	k := authtest.NewSoftKey(t)
	u := f.passkeyUser(t, "lena@example.com", k)
	wrong := func(o string) string { return k.Get(t, o, 1, authtest.NewSoftKey(t)) }
	right := func(o string) string { return k.Get(t, o, 1, nil) }
	limited := func(err error) bool { var l *auth.LimitedError; return errors.As(err, &l) }

	t.Run("account", func(t *testing.T) {
		limit := f.cfg.Limits[auth.RuleMFAAccount].Count
		for i := range limit {
			// From networks of their own: mfa_ip is not the one to stop them.
			if err := f.passkeyAlone(t, fmt.Sprintf("198.51.%d.1", i), wrong); !errors.Is(err, auth.ErrInvalidPasskey) {
				t.Fatalf("wrong signature %d: %v", i+1, err)
			}
		}
		before := f.signCount(t, u.ID)
		if err := f.passkeyAlone(t, "203.0.113.1", right); !limited(err) {
			t.Fatalf("the right passkey after %d wrong ones: %v, want *LimitedError", limit, err)
		}
		if got := f.signCount(t, u.ID); got != before {
			t.Errorf("counter %d after a refused assertion, want %d: it was verified", got, before)
		}
	})
	t.Run("network", func(t *testing.T) {
		// Another account, not locked by the account's test.
		k := authtest.NewSoftKey(t)
		f.passkeyUser(t, "nina@example.com", k)
		limit := f.cfg.Limits[auth.RuleMFANetwork].Count
		unknown := func(o string) string { return authtest.NewSoftKey(t).Get(t, o, 1, nil) }
		for i := range limit {
			if err := f.passkeyAlone(t, "192.0.2.60", unknown); !errors.Is(err, auth.ErrInvalidPasskey) {
				t.Fatalf("unknown credential %d: %v", i+1, err)
			}
		}
		right := func(o string) string { return k.Get(t, o, 1, nil) }
		if err := f.passkeyAlone(t, "192.0.2.60", right); !limited(err) {
			t.Errorf("the right passkey from the network after %d unknown credentials: %v, want *LimitedError", limit, err)
		}
		if err := f.passkeyAlone(t, "192.0.2.61", right); err != nil {
			t.Errorf("the right passkey from another network: %v", err)
		}
	})
}

// TestPasskeyAloneAfterReset: a password reset stops the account's
// passkeys signing in alone: one registered by whoever had the password
// would otherwise outlive the reset that ended that person's sessions.
// Each still serves as the second step after the new password, and once
// so used signs in alone again.
func TestPasskeyAloneAfterReset(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	k := authtest.NewSoftKey(t)
	f.passkeyUser(t, "rita@example.com", k)
	if err := f.passkeyAlone(t, "192.0.2.80", func(o string) string { return k.Get(t, o, 1, nil) }); err != nil {
		t.Fatalf("a passkey alone before the reset: %v", err)
	}
	token := requestResetToken(t, f, "rita@example.com")
	const fresh = "a new password after the reset"
	if err := f.svc.ConfirmReset(ctx, token, fresh, client("192.0.2.81")); err != nil {
		t.Fatal(err)
	}
	if err := f.passkeyAlone(t, "192.0.2.82", func(o string) string { return k.Get(t, o, 2, nil) }); !errors.Is(err, auth.ErrPasskeyNeedsPassword) {
		t.Fatalf("a passkey alone after the reset: %v, want ErrPasskeyNeedsPassword", err)
	}
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "rita@example.com", Password: fresh, Client: client("192.0.2.83")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("the new password: %v, want ErrMFARequired", err)
	}
	if _, err := f.svc.SecondStepPasskey(ctx, f.secondStepAnswer(t, res.MFA, k, 3)); err != nil {
		t.Fatalf("the passkey as the second step after the new password: %v", err)
	}
	if err := f.passkeyAlone(t, "192.0.2.84", func(o string) string { return k.Get(t, o, 4, nil) }); err != nil {
		t.Errorf("a passkey alone once used after the new password: %v", err)
	}
}

// TestPasskeySignInsLimitedPerAccount: a passkey alone signs in at most
// passkey_account times per window, from any number of networks, as a
// password at most login_account times: one passkey cannot make sessions
// without end. Only verified sign-ins count, so a wrong passkey spends
// nothing of it.
func TestPasskeySignInsLimitedPerAccount(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RulePasskeyAccount] = ratelimit.Limit{Count: 2, Window: time.Hour}
	})
	k := authtest.NewSoftKey(t)
	f.passkeyUser(t, "pat@example.com", k)
	other := authtest.NewSoftKey(t)
	for i := range 3 {
		// Another key's answers are refused before they count.
		if err := f.passkeyAlone(t, fmt.Sprintf("2001:db8:9:%x::1", i), func(o string) string { return other.Get(t, o, 1, nil) }); err == nil {
			t.Fatal("another key signed in")
		}
	}
	for i := range 9 {
		err := f.passkeyAlone(t, fmt.Sprintf("2001:db8:1:%x::1", i), func(o string) string { return k.Get(t, o, i+2, nil) })
		var limited *auth.LimitedError
		switch {
		case i < 2 && err != nil:
			t.Fatalf("sign-in %d with the passkey: %v", i, err)
		case i >= 2 && !errors.As(err, &limited):
			t.Fatalf("sign-in %d with the passkey, past passkey_account: %v, want LimitedError", i, err)
		}
	}
	// Refused for the rate, never counted as the passkey's failures: more
	// than mfa_account's 5 in a row lock nothing.
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, f, `SELECT count(*) FROM security_events WHERE kind = 'mfa_lockout'`); n != 0 {
		t.Fatalf("%d second-step lockouts after sign-ins refused by passkey_account, want none", n)
	}
}
