package auth_test

// What a hostile client makes of WebAuthn's answers: a ceremony of one
// flow answered in another, answered at once by many requests or after
// its time, and authenticator data a browser would never pass on. The
// library checks most of these; the tests hold the service to them,
// whichever way it calls it.

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestPasskeyCeremonyOfAnotherFlow: a ceremony answers only the flow that
// began it. A registration's, a second step's and a passwordless
// sign-in's challenge, each answered in another flow by the account's own
// passkey, sign nobody in and store nothing; nor does one account's
// registration finished from another's session.
func TestPasskeyCeremonyOfAnotherFlow(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	k := authtest.NewSoftKey(t)
	u := f.passkeyUser(t, "flows@example.com", k)
	noCookie := func(string) string { return "" }

	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "flows@example.com", Password: passkeyPassword, Client: client("192.0.2.10")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatal(err)
	}
	in, err := f.svc.SecondStepPasskey(ctx, f.secondStepAnswer(t, res.MFA, k, 1))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := f.svc.BeginPasskey(ctx, in.Session, client("192.0.2.10"))
	if err != nil {
		t.Fatal(err)
	}
	alone := func(c auth.PasskeyCeremony) error {
		_, err := f.svc.PasskeySignIn(ctx, auth.PasskeySignInRequest{Ceremony: c.Binding,
			Response: []byte(k.Get(t, optionsJSON(t, c), 1, nil)), Client: client("192.0.2.11"), Cookie: noCookie})
		return err
	}
	if err := alone(reg); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("a registration's ceremony answered as a passwordless sign-in: %v, want ErrInvalidToken", err)
	}

	step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "flows@example.com", Password: passkeyPassword, Client: client("192.0.2.12")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatal(err)
	}
	sc, err := f.svc.BeginSecondStepPasskey(ctx, step.MFA.Token, step.MFA.Binding, client("192.0.2.12"))
	if err != nil {
		t.Fatal(err)
	}
	if err := alone(sc); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("a second step's ceremony answered as a passwordless sign-in: %v, want ErrInvalidToken", err)
	}
	pc, err := f.svc.BeginPasskeySignIn(ctx, client("192.0.2.12"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SecondStepPasskey(ctx, auth.PasskeyStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding, Ceremony: pc.Binding,
		Response: []byte(k.Get(t, optionsJSON(t, pc), 1, nil)), Client: client("192.0.2.12"), Cookie: noCookie}); !errors.Is(err, auth.ErrInvalidPasskey) {
		t.Errorf("a passwordless sign-in's ceremony answered as the second step: %v, want ErrInvalidPasskey", err)
	}
	ch := auth.FactorChange{Session: in.Session.Token, Password: passkeyPassword, Client: client("192.0.2.10"), DeviceCookie: in.Device.Value}
	for name, c := range map[string]auth.PasskeyCeremony{"second step's": sc, "passwordless sign-in's": pc} {
		if _, err := f.svc.FinishPasskey(ctx, ch, c.Binding, "Again", []byte(authtest.NewSoftKey(t).Create(t, optionsJSON(t, reg)))); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("a registration finished under a %s ceremony: %v, want ErrInvalidToken", name, err)
		}
	}

	// Another account's session finishes this account's registration.
	f.addUser(t, "other@example.com", passkeyPassword, false)
	other, err := f.svc.Login(ctx, auth.LoginRequest{Email: "other@example.com", Password: passkeyPassword, Client: client("192.0.2.13")})
	if err != nil {
		t.Fatal(err)
	}
	och := auth.FactorChange{Session: other.Session.Token, Password: passkeyPassword, Client: client("192.0.2.13"), DeviceCookie: other.Device.Value}
	if _, err := f.svc.FinishPasskey(ctx, och, reg.Binding, "Theirs", []byte(authtest.NewSoftKey(t).Create(t, optionsJSON(t, reg)))); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("another account's registration ceremony: %v, want ErrInvalidToken", err)
	}
	if n := countRows(t, f, `SELECT count(*) FROM second_factors WHERE kind = 'webauthn'`); n != 1 {
		t.Errorf("%d passkeys stored, want the one registered (account %d)", n, u.ID)
	}
}

// TestPasskeyAuthenticatorDataRefused: an assertion signed by the right
// key but for another relying party (the RP ID hash of another domain),
// from another origin, without the user-present flag, naming another
// account's user handle, or with the counter where it was, signs in
// neither alone nor as the second step; nor does another account's
// passkey answer this account's second step. The stored counter stays.
func TestPasskeyAuthenticatorDataRefused(t *testing.T) {
	// More wrong answers than mfa_account's five: each case is to be
	// refused for itself, not for the lock the others made.
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RuleMFAAccount] = ratelimit.Limit{Count: 20, Window: 15 * time.Minute}
	})
	ctx := t.Context()
	k := authtest.NewSoftKey(t)
	u := f.passkeyUser(t, "data@example.com", k)
	o := authtest.NewSoftKey(t)
	f.passkeyUser(t, "else@example.com", o)
	if err := f.passkeyAlone(t, "192.0.2.20", func(opts string) string { return k.Get(t, opts, 3, nil) }); err != nil {
		t.Fatalf("the passkey alone: %v", err)
	}
	stored := f.signCount(t, u.ID)

	hostile := []struct {
		name string
		set  func()
	}{
		{"RP ID of another domain", func() { k.RPID = "example.com" }},
		{"another origin", func() { k.Origin = "https://evil.login.example.test" }},
		{"user not present", func() { k.Absent = true }},
		{"another account's user handle", func() { k.Handle = o.Handle }},
	}
	handle := k.Handle
	reset := func() { k.RPID, k.Origin, k.Absent, k.Handle = authtest.SoftRPID, authtest.SoftOrigin, false, handle }
	for _, tc := range hostile {
		err := f.passkeyAlone(t, "192.0.2.21", func(opts string) string { tc.set(); defer reset(); return k.Get(t, opts, 1, nil) })
		if !errors.Is(err, auth.ErrInvalidPasskey) {
			t.Errorf("alone, %s: %v, want ErrInvalidPasskey", tc.name, err)
		}
	}
	k.Count = stored
	if err := f.passkeyAlone(t, "192.0.2.21", func(opts string) string { return k.Get(t, opts, 0, nil) }); !errors.Is(err, auth.ErrInvalidPasskey) {
		t.Errorf("alone, the counter where it was: %v, want ErrInvalidPasskey", err)
	}

	hostile = append(hostile, struct {
		name string
		set  func()
	}{"the counter where it was", func() { k.Count = stored - 1 }})
	for _, tc := range hostile {
		res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "data@example.com", Password: passkeyPassword, Client: client("192.0.2.22")})
		if !errors.Is(err, auth.ErrMFARequired) {
			t.Fatal(err)
		}
		tc.set()
		req := f.secondStepAnswer(t, res.MFA, k, 1)
		reset()
		if _, err := f.svc.SecondStepPasskey(ctx, req); !errors.Is(err, auth.ErrInvalidPasskey) {
			t.Errorf("second step, %s: %v, want ErrInvalidPasskey", tc.name, err)
		}
	}
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "data@example.com", Password: passkeyPassword, Client: client("192.0.2.23")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatal(err)
	}
	if _, err := f.svc.SecondStepPasskey(ctx, f.secondStepAnswer(t, res.MFA, o, 1)); !errors.Is(err, auth.ErrInvalidPasskey) {
		t.Errorf("another account's passkey as the second step: %v, want ErrInvalidPasskey", err)
	}
	if got := f.signCount(t, u.ID); got != stored {
		t.Errorf("stored counter %d after the refused answers, want %d", got, stored)
	}
}

// TestPasskeyRegistrationRefused: a registration for another relying
// party, from another origin or without the user-present flag stores
// nothing; a credential registered to another account is not registered
// again; and one ceremony finished by several requests at once registers
// one passkey.
func TestPasskeyRegistrationRefused(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	theirs := authtest.NewSoftKey(t)
	f.passkeyUser(t, "first@example.com", theirs)
	u := f.addUser(t, "second@example.com", passkeyPassword, false)
	in, err := f.svc.Login(ctx, auth.LoginRequest{Email: "second@example.com", Password: passkeyPassword, Client: client("192.0.2.30")})
	if err != nil {
		t.Fatal(err)
	}
	ch := auth.FactorChange{Session: in.Session.Token, Password: passkeyPassword, Client: client("192.0.2.30"), DeviceCookie: in.Device.Value}
	begin := func() auth.PasskeyCeremony {
		c, err := f.svc.BeginPasskey(ctx, in.Session, client("192.0.2.30"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for name, set := range map[string]func(k *authtest.SoftKey){
		"RP ID of another domain": func(k *authtest.SoftKey) { k.RPID = "example.com" },
		"another origin":          func(k *authtest.SoftKey) { k.Origin = "https://evil.example.test" },
		"user not present":        func(k *authtest.SoftKey) { k.Absent = true },
	} {
		c := begin()
		k := authtest.NewSoftKey(t)
		set(k)
		if _, err := f.svc.FinishPasskey(ctx, ch, c.Binding, "Hostile", []byte(k.Create(t, optionsJSON(t, c)))); !errors.Is(err, auth.ErrInvalidPasskey) {
			t.Errorf("a registration, %s: %v, want ErrInvalidPasskey", name, err)
		}
	}
	// The other account's credential id, with a key of this client's.
	c := begin()
	if _, err := f.svc.FinishPasskey(ctx, ch, c.Binding, "Theirs", []byte(theirs.Create(t, optionsJSON(t, c)))); !errors.Is(err, auth.ErrPasskeyExists) {
		t.Errorf("another account's credential registered again: %v, want ErrPasskeyExists", err)
	}

	c = begin()
	var bodies [][]byte
	for range 4 {
		bodies = append(bodies, []byte(authtest.NewSoftKey(t).Create(t, optionsJSON(t, c))))
	}
	onceAtOnce(t, "a registration", len(bodies), func(i int) error {
		_, err := f.svc.FinishPasskey(ctx, ch, c.Binding, "Laptop", bodies[i])
		return err
	})
	var n int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM second_factors WHERE user_id = $1`, u.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d passkeys stored from one ceremony finished four times at once (%v), want 1", n, err)
	}
}

// TestPasskeyCeremonyAnsweredAtOnce: one passwordless ceremony answered
// by several requests at once signs in once, and one past its five
// minutes signs in never.
func TestPasskeyCeremonyAnsweredAtOnce(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	k := authtest.NewSoftKey(t)
	f.passkeyUser(t, "once@example.com", k)
	c, err := f.svc.BeginPasskeySignIn(ctx, client("192.0.2.40"))
	if err != nil {
		t.Fatal(err)
	}
	answer := []byte(k.Get(t, optionsJSON(t, c), 1, nil))
	onceAtOnce(t, "an answer", 8, func(int) error {
		_, err := f.svc.PasskeySignIn(ctx, auth.PasskeySignInRequest{Ceremony: c.Binding, Response: answer,
			Client: client("192.0.2.40"), Cookie: func(string) string { return "" }})
		return err
	})

	c, err = f.svc.BeginPasskeySignIn(ctx, client("192.0.2.41"))
	if err != nil {
		t.Fatal(err)
	}
	f.advance(5*time.Minute + time.Second)
	if _, err := f.svc.PasskeySignIn(ctx, auth.PasskeySignInRequest{Ceremony: c.Binding, Response: []byte(k.Get(t, optionsJSON(t, c), 1, nil)),
		Client: client("192.0.2.41"), Cookie: func(string) string { return "" }}); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("a ceremony answered after its five minutes: %v, want ErrInvalidToken", err)
	}
}

// onceAtOnce makes n calls of one ceremony at once (call(i), i from 0 to
// n-1): exactly one succeeds, and every other is ErrInvalidToken.
func onceAtOnce(t *testing.T, what string, n int, call func(i int) error) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = call(i) })
	}
	wg.Wait()
	succeeded := 0
	for _, err := range errs {
		switch {
		case err == nil:
			succeeded++
		case !errors.Is(err, auth.ErrInvalidToken):
			t.Errorf("%s at once: %v, want ErrInvalidToken if not the first", what, err)
		}
	}
	if succeeded != 1 {
		t.Errorf("%s made %d times at once succeeded %d times, want once", what, n, succeeded)
	}
}
