package auth_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/app"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestCheckMFAKey: a service whose key does not open the authenticator
// apps its database holds, sealed, says so before it serves: with no key,
// and with another key, every owner of such a factor would be refused at
// the second step. The key they were sealed with passes, and so does any
// key, or none, on a database whose secrets are all stored as they are.
func TestCheckMFAKey(t *testing.T) {
	keyA := []byte("0123456789abcdef0123456789ABCDEF")
	keyB := []byte("fedcba9876543210fedcba9876543210")
	sealed := newFixture(t, func(c *auth.Config) { c.MFA.Key = keyA })
	plain := newFixture(t, nil)
	empty := newFixture(t, nil)
	secret := enrolTOTP(t, sealed, "ann@example.com")
	enrolTOTP(t, plain, "bob@example.com")

	tests := []struct {
		name string
		on   *fixture
		key  []byte
		want error
	}{
		{"sealed, no key", sealed, nil, auth.ErrMFAKeyMissing},
		{"sealed, another key", sealed, keyB, auth.ErrMFAKeyWrong},
		{"sealed, its key", sealed, keyA, nil},
		{"plain, no key", plain, nil, nil},
		{"plain, a key set since", plain, keyB, nil},
		{"no factor, no key", empty, nil, nil},
		{"no factor, a key", empty, keyA, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := serviceOn(t, tt.on, func(c *auth.Config) { c.MFA.Key = tt.key }).CheckMFAKey(t.Context())
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("CheckMFAKey: %v, want %v", err, tt.want)
			}
			if err != nil && (strings.Contains(err.Error(), secret) || tt.key != nil &&
				(strings.Contains(err.Error(), string(tt.key)) || strings.Contains(err.Error(), hex.EncodeToString(tt.key)))) {
				t.Errorf("CheckMFAKey's error %q shows the secret or the key", err)
			}
		})
	}
}

// serviceOn is another service on f's database and Redis, its settings
// f's changed by configure, as another replica is; its background work
// does not run.
func serviceOn(t *testing.T, f *fixture, configure func(*auth.Config)) *auth.Service {
	t.Helper()
	hasher, err := auth.NewHasher(fastParams, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.cfg
	if configure != nil {
		configure(&cfg)
	}
	xc, err := app.New(cfg, app.Deps{Postgres: f.db, Redis: f.rdb, KeyPrefix: f.prefix, Hasher: hasher,
		Mailer: auth.LogMailer{Logger: slog.New(slog.DiscardHandler)}, Attack: xcloaktest.ManualAttack()})
	if err != nil {
		t.Fatal(err)
	}
	return xc.Service
}

// enrolTOTP signs email, a new account of f, in and confirms an
// authenticator app for it; it returns the app's key (base32).
func enrolTOTP(t *testing.T, f *fixture, email string) string {
	t.Helper()
	ctx := t.Context()
	f.addUser(t, email, "password123", false)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := confirmTOTP(t, f, res)
	return secret
}

// confirmTOTP confirms an authenticator app for the account res signed in
// (its password "password123", from 192.0.2.7); it returns the app's key
// (base32) and the recovery codes.
func confirmTOTP(t *testing.T, f *fixture, res auth.LoginResult) (secret string, recovery []string) {
	t.Helper()
	enrol, err := f.svc.BeginTOTP(t.Context(), res.Session, client("192.0.2.200"))
	if err != nil {
		t.Fatal(err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}
	recovery, err = f.svc.ConfirmTOTP(t.Context(), ch, enrol.ID, totpAt(t, enrol.Secret, time.Now()))
	if err != nil || len(recovery) == 0 {
		t.Fatalf("ConfirmTOTP = %d codes, %v", len(recovery), err)
	}
	return enrol.Secret, recovery
}

// heldInAttackMode makes ann@example.com (password "password123") with a
// confirmed authenticator app, signed in once from 192.0.2.7 (res, whose
// device is known), and switches attack mode on, so that a sign-in from
// any other browser gets a held second step. It returns the sign-in, the
// app's key and the recovery codes.
func heldInAttackMode(t *testing.T, f *fixture) (res auth.LoginResult, secret string, recovery []string) {
	t.Helper()
	f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	secret, recovery = confirmTOTP(t, f, res)
	if _, err := f.attack.SwitchAttack(t.Context(), true, "test"); err != nil {
		t.Fatal(err)
	}
	return res, secret, recovery
}

// wrongCode is a six-digit code other than right, a code of six digits.
func wrongCode(right string) string {
	n, err := strconv.Atoi(right)
	if err != nil {
		panic("wrongCode of " + right)
	}
	return fmt.Sprintf("%06d", (n+500_000)%1_000_000)
}

// TestUnopenedAppLeavesTheOthersWorking: an authenticator app whose secret
// the key cannot open (sealed under another XCLOAK_MFA_KEY, or damaged)
// does not refuse the codes of the account's other apps: a code of one
// of them signs in. A code no app took is answered unavailable (503), not
// wrong: it may be the unopened app's.
func TestUnopenedAppLeavesTheOthersWorking(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.MFA.Key = []byte("0123456789abcdef0123456789ABCDEF") })
	ctx := t.Context()
	f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := confirmTOTP(t, f, res)
	enrol, err := f.svc.BeginTOTP(ctx, res.Session, client("192.0.2.7"))
	if err != nil {
		t.Fatal(err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}
	if _, err := f.svc.ConfirmTOTP(ctx, ch, enrol.ID, totpAt(t, enrol.Secret, time.Now())); err != nil {
		t.Fatal(err)
	}
	// The first app's sealed secret no longer opens: its tag is damaged.
	if _, err := f.db.Exec(ctx, `UPDATE second_factors SET secret = set_byte(secret, length(secret) - 1, get_byte(secret, length(secret) - 1) # 1)
		WHERE id = (SELECT min(id) FROM second_factors)`); err != nil {
		t.Fatal(err)
	}
	answer := func(code string) error {
		step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7"),
			DeviceCookie: res.Device.Value})
		if !errors.Is(err, auth.ErrMFARequired) {
			t.Fatalf("sign-in: %v, want ErrMFARequired", err)
		}
		_, err = f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding, Code: code,
			Client: client("192.0.2.7"), Cookie: func(string) string { return res.Device.Value }})
		return err
	}
	// The next time step's codes: the current one's were spent confirming.
	next := time.Now().Add(30 * time.Second)
	if err := answer(totpAt(t, first, next)); !errors.Is(err, auth.ErrUnavailable) {
		t.Errorf("a code of the app that no longer opens: %v, want ErrUnavailable", err)
	}
	if err := answer(totpAt(t, enrol.Secret, next)); err != nil {
		t.Errorf("a code of the other app: %v, want signed in", err)
	}
}

// TestHeldAnswerBesideAnUnopenedAppTellsNothing: on an account with an
// authenticator app that does not open, a held second step's code that
// another app took already is answered unavailable whatever the held
// sign-in's password was. Answered as reused, which only a right
// password's step can find, it would tell the password was right.
func TestHeldAnswerBesideAnUnopenedAppTellsNothing(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.MFA.Key = []byte("0123456789abcdef0123456789ABCDEF") })
	ctx := t.Context()
	res, _, _ := heldInAttackMode(t, f)
	enrol, err := f.svc.BeginTOTP(ctx, res.Session, client("192.0.2.7"))
	if err != nil {
		t.Fatal(err)
	}
	// Spent by the confirmation, and matched for a step either side.
	spent := totpAt(t, enrol.Secret, time.Now())
	ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}
	if _, err := f.svc.ConfirmTOTP(ctx, ch, enrol.ID, spent); err != nil {
		t.Fatal(err)
	}
	// The first app's sealed secret no longer opens.
	if _, err := f.db.Exec(ctx, `UPDATE second_factors SET secret = set_byte(secret, length(secret) - 1, get_byte(secret, length(secret) - 1) # 1)
		WHERE id = (SELECT min(id) FROM second_factors)`); err != nil {
		t.Fatal(err)
	}
	for i, password := range []string{"password123", "not the password"} {
		ip := fmt.Sprintf("198.51.100.%d", 60+i)
		step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: password, Client: client(ip)})
		if !errors.Is(err, auth.ErrVerificationRequired) || step.MFA.Token == "" {
			t.Fatalf("sign-in from a new browser in attack mode: %v, %+v; want a held second step", err, step.MFA)
		}
		_, err = f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding,
			Code: spent, Client: client(ip), Cookie: func(string) string { return "" }})
		if !errors.Is(err, auth.ErrUnavailable) {
			t.Errorf("held answer of the %q sign-in with the other app's spent code: %v, want ErrUnavailable", password, err)
		}
	}
}
