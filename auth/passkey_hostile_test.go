package auth_test

// What a hostile client does with passkeys: registers one across a new
// password, names another's credential without its key, makes up
// ceremonies, begins registrations without end.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/app"
	"github.com/xcloak/xcloak/postgres"
)

// TestPasskeyRegisteredAcrossNewPassword: whoever has the password and a
// session finishes a passkey's registration while the owner's new password
// is stored (a reset, an operator's password). The registration checked
// the old password; the passkey is not stored, and does not sign in alone
// after the new password, which stops every passkey signing in alone.
func TestPasskeyRegisteredAcrossNewPassword(t *testing.T) {
	var hasher *auth.Hasher
	f := newFixture(t, nil, func(d *app.Deps) { hasher = d.Hasher })
	ctx := t.Context()
	const email = "owner@example.com"
	f.addUser(t, email, passkeyPassword, false)

	// The attacker knows the password and has a session.
	in, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: passkeyPassword, Client: client("203.0.113.66")})
	if err != nil {
		t.Fatal(err)
	}
	evil := authtest.NewSoftKey(t)
	c, err := f.svc.BeginPasskey(ctx, in.Session, client("203.0.113.66"))
	if err != nil {
		t.Fatal(err)
	}
	created := []byte(evil.Create(t, optionsJSON(t, c)))

	// The owner's new password, hashed beforehand (the hashes are held
	// below).
	newHash, err := hasher.Hash(ctx, "the owner's new password")
	if err != nil {
		t.Fatal(err)
	}

	// The attacker's FinishPasskey verifies the old password: held in
	// its hash slot, i.e. after the account's row was read.
	release := auth.HoldHashes(hasher)
	defer release()
	done := make(chan error, 1)
	go func() {
		ch := auth.FactorChange{Session: in.Session.Token, Password: passkeyPassword, Client: client("203.0.113.66"), DeviceCookie: in.Device.Value}
		_, err := f.svc.FinishPasskey(ctx, ch, c.Binding, "mine now", created)
		done <- err
	}()
	waitUntil(t, "the registration's password check in flight", func() bool { return hasher.Stats().Running == 1 })

	// Meanwhile the owner's new password is stored, as a reset or the
	// operator's SetPassword stores it: sessions end, passkeys stop
	// signing in alone.
	if _, err := postgres.New(f.db).SetPassword(ctx, email, newHash); err != nil {
		t.Fatal(err)
	}
	release()
	regErr := <-done

	// The registration is refused: the password it verified is no longer
	// the account's, whose sessions ended with it.
	if !errors.Is(regErr, auth.ErrNoSession) {
		t.Errorf("the registration across the new password: %v, want ErrNoSession", regErr)
	}
	signIn := f.passkeyAlone(t, "203.0.113.67", func(o string) string { return evil.Get(t, o, 1, nil) })
	if signIn == nil {
		t.Errorf("the attacker's passkey, registered with the old password (FinishPasskey: %v), signs in alone after the new password was stored", regErr)
	}
}

// TestPasskeyAloneLocksNotTheSecondStep: whoever knows one of the
// account's credential ids (listed to anyone who once had the password, in
// the second step's allowCredentials and the registration's
// excludeCredentials), but not its key, tries it alone until it locks:
// that locks the passkey alone, not the owner's second step after the
// password (keycloak#46164).
func TestPasskeyAloneLocksNotTheSecondStep(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	k := authtest.NewSoftKey(t)
	f.passkeyUser(t, "olga@example.com", k)

	// The attacker has no private key, only the credential id: k signs
	// with another key (a wrong signature) but names its own credential.
	forged := func(o string) string { return k.Get(t, o, 1, authtest.NewSoftKey(t)) }
	limit := f.cfg.Limits[auth.RuleMFAAccount].Count
	for i := range limit {
		_ = f.passkeyAlone(t, fmt.Sprintf("198.51.%d.7", i), forged)
	}

	// What they locked is the passkey alone, the right one included.
	var limited *auth.LimitedError
	if err := f.passkeyAlone(t, "192.0.2.201", func(o string) string { return k.Get(t, o, 1, nil) }); !errors.As(err, &limited) {
		t.Errorf("the right passkey alone after %d forged answers: %v, want it locked", limit, err)
	}

	// The owner, with the password and the right passkey as the second
	// step, from their own network.
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "olga@example.com", Password: passkeyPassword, Client: client("192.0.2.200")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("the owner's password: %v", err)
	}
	req := f.secondStepAnswer(t, res.MFA, k, 2)
	req.Client = client("192.0.2.200")
	_, err = f.svc.SecondStepPasskey(ctx, req)
	var l *auth.LimitedError
	if errors.As(err, &l) {
		t.Errorf("the owner's right second step, after %d forged passwordless assertions by someone without the password: %v (locked for %s)", limit, err, l.RetryAfter)
	} else if err != nil {
		t.Fatalf("second step: %v", err)
	}
}

// TestPasskeyAloneMadeUpCeremoniesLimited: passwordless answers under
// made-up ceremony cookies are counted by the network's rate before the
// ceremony is looked up, so they cost no query past it.
func TestPasskeyAloneMadeUpCeremoniesLimited(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	limit := f.cfg.Limits[auth.RuleMFANetwork].Count
	for i := range 3 * limit {
		_, err := f.svc.PasskeySignIn(ctx, auth.PasskeySignInRequest{
			Ceremony: fmt.Sprintf("%043d", i), // well formed: 43 base64url characters
			Response: []byte(`{}`), Client: client("192.0.2.99"), Cookie: func(string) string { return "" }})
		if errors.Is(err, auth.ErrLimited) {
			return
		}
		if !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("answer %d: %v", i+1, err)
		}
	}
	t.Errorf("%d passwordless answers with made-up ceremonies from one address (mfa_ip is %d): each looked up in Postgres, none limited", 3*limit, limit)
}

// TestPasskeyRegistrationsBegunLimited: each registration begun stores a
// ceremony, so one session's are counted by passkey_options_ip, as
// sign-ins begun are.
func TestPasskeyRegistrationsBegunLimited(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	f.addUser(t, "rows@example.com", passkeyPassword, false)
	in, err := f.svc.Login(ctx, auth.LoginRequest{Email: "rows@example.com", Password: passkeyPassword, Client: client("192.0.2.77")})
	if err != nil {
		t.Fatal(err)
	}
	limit := f.cfg.Limits[auth.RulePasskeyOptionsIP].Count
	for i := range 3 * limit {
		if _, err := f.svc.BeginPasskey(ctx, in.Session, client("203.0.113.66")); err != nil {
			if errors.Is(err, auth.ErrLimited) {
				return
			}
			t.Fatalf("BeginPasskey %d: %v", i+1, err)
		}
	}
	var n int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM webauthn_ceremonies WHERE purpose = 'register'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	t.Errorf("%d registration ceremonies begun by one session (passkey_options_ip is %d): none limited, %d rows stored", 3*limit, limit, n)
}

// TestPasskeyHostileTransports: the transports a registration's response
// lists are the client's own words, which the library passes on as they
// are. A NUL byte among them, or a list without end, is no failure of the
// database: the passkey is registered with the transports that can be
// what a browser sends, and signs in.
func TestPasskeyHostileTransports(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	for i, transports := range [][]string{
		{"usb", "a\x00b"},
		{"internal", strings.Repeat("x", 4000)},
		slices.Repeat([]string{"hybrid"}, 500),
	} {
		email := fmt.Sprintf("transports%d@example.com", i)
		f.addUser(t, email, passkeyPassword, false)
		in, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: passkeyPassword, Client: client("192.0.2.10")})
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.svc.BeginPasskey(ctx, in.Session, client("192.0.2.10"))
		if err != nil {
			t.Fatal(err)
		}
		k := authtest.NewSoftKey(t)
		k.Transports = transports
		ch := auth.FactorChange{Session: in.Session.Token, Password: passkeyPassword, Client: client("192.0.2.10"), DeviceCookie: in.Device.Value}
		if _, err := f.svc.FinishPasskey(ctx, ch, c.Binding, "Hostile", []byte(k.Create(t, optionsJSON(t, c)))); err != nil {
			t.Errorf("a registration listing %d transports (%d bytes at most): %v, want it registered", len(transports),
				len(slices.MaxFunc(transports, func(a, b string) int { return len(a) - len(b) })), err)
			continue
		}
		var stored []string
		if err := f.db.QueryRow(ctx, `SELECT transports FROM second_factors WHERE user_id = $1 AND kind = 'webauthn'`, in.Session.UserID).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if len(stored) > 8 || slices.ContainsFunc(stored, func(s string) bool { return len(s) > 32 || strings.ContainsRune(s, 0) }) {
			t.Errorf("%d transports stored, %d bytes at most", len(stored),
				len(slices.MaxFunc(stored, func(a, b string) int { return len(a) - len(b) })))
		}
		if err := f.passkeyAlone(t, "192.0.2.11", func(o string) string { return k.Get(t, o, 1, nil) }); err != nil {
			t.Errorf("the passkey registered with hostile transports, alone: %v", err)
		}
	}
}
