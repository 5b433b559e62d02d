package auth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached/breachedtest"
	"github.com/xcloak/xcloak/internal/app"
)

// slowParams are parameters past fastParams: a hasher with them rehashes
// at sign-in a password stored under fastParams.
var slowParams = auth.Params{Memory: 32 * 1024, Time: 3, Threads: 1, SaltLen: 16, KeyLen: 32}

// newHasher is a hasher with p, four hashes at a time.
func newHasher(t *testing.T, p auth.Params) *auth.Hasher {
	h, err := auth.NewHasher(p, 4, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// usingHasher makes a fixture's service hash with h.
func usingHasher(h *auth.Hasher) func(*app.Deps) {
	return func(d *app.Deps) { d.Hasher = h }
}

// replacePassword does what a reset does to the account, in one
// transaction, with a hash computed beforehand, so that it commits while
// a sign-in is still verifying the old password.
func replacePassword(t *testing.T, f *fixture, email, hash string) {
	t.Helper()
	tx, err := f.db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	for _, q := range []string{
		`UPDATE users SET password_hash = $2, updated_at = now() WHERE email = $1`,
		`DELETE FROM sessions WHERE user_id = (SELECT id FROM users WHERE email = $1)`,
		`DELETE FROM devices WHERE user_id = (SELECT id FROM users WHERE email = $1)`,
	} {
		args := []any{email}
		if q[0] == 'U' {
			args = append(args, hash)
		}
		if _, err := tx.Exec(t.Context(), q, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestKnownDeviceSessionDiesWithReplacedPassword: a known device signing
// in with the old password while the password is replaced gets no session
// that outlives the replacement, whichever finishes first.
func TestKnownDeviceSessionDiesWithReplacedPassword(t *testing.T) {
	h := newHasher(t, fastParams)
	f := newFixture(t, nil, usingHasher(h))
	f.addUser(t, "ann@example.com", "old password", false)
	other, err := auth.NewHasher(fastParams, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	newHash, err := other.Hash(t.Context(), "brand new password")
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "old password", Client: client("192.0.2.66")})
	if err != nil {
		t.Fatal(err)
	}
	release := auth.HoldHashes(h)
	defer release()
	var wg sync.WaitGroup
	var res auth.LoginResult
	var loginErr error
	wg.Go(func() {
		res, loginErr = f.svc.Login(context.Background(), auth.LoginRequest{
			Email: "ann@example.com", Password: "old password", Client: client("192.0.2.66"), DeviceCookie: first.Device.Value})
	})
	// The account is read and its old password is being verified, held.
	waitUntil(t, "the sign-in's password check in flight", func() bool { return h.Stats().Running == 1 })
	replacePassword(t, f, "ann@example.com", newHash)
	release()
	wg.Wait()
	if loginErr != nil {
		return // refused: nothing to outlive the replacement
	}
	if _, err := f.svc.Session(t.Context(), res.Session.Token); err == nil {
		t.Fatal("a session made with the old password is live after the password was replaced")
	}
}

// TestRehashDoesNotUndoReplacedPassword: a sign-in whose stored hash has
// old parameters stores a new hash of the password it verified; if the
// password was replaced meanwhile, that write must not bring the old
// password back.
func TestRehashDoesNotUndoReplacedPassword(t *testing.T) {
	old, err := auth.NewHasher(fastParams, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := newHasher(t, slowParams)
	f := newFixture(t, nil, usingHasher(h))
	u := f.addUser(t, "ann@example.com", "placeholder password", false)
	oldHash, err := old.Hash(t.Context(), "old password")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(t.Context(), `UPDATE users SET password_hash = $2 WHERE id = $1`, u.ID, oldHash); err != nil {
		t.Fatal(err)
	}
	newHash, err := old.Hash(t.Context(), "brand new password")
	if err != nil {
		t.Fatal(err)
	}
	release := auth.HoldHashes(h)
	defer release()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = f.svc.Login(context.Background(), auth.LoginRequest{Email: "ann@example.com", Password: "old password", Client: client("192.0.2.66")})
	})
	// The account is read and its old hash is being verified, held: the
	// rehash that follows writes over a hash replaced meanwhile.
	waitUntil(t, "the sign-in's password check in flight", func() bool { return h.Stats().Running == 1 })
	replacePassword(t, f, "ann@example.com", newHash)
	release()
	wg.Wait()
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "brand new password", Client: client("192.0.2.7")}); err != nil {
		t.Errorf("the new password: %v, want it to sign in", err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "old password", Client: client("192.0.2.8")}); err == nil {
		t.Error("the old password signs in again after it was replaced")
	}
}

// TestSignOutEverywhereEndsSignInInFlight: a sign-in verifying the
// password while an administrator signs the account out everywhere gets
// no session and adds no device that outlive the sign-out, as one racing
// a password replacement gets none. From a known browser under
// verification "always", whichever finishes first, the browser is then a
// stranger: held for verification. From a new browser it is no known
// device afterwards.
func TestSignOutEverywhereEndsSignInInFlight(t *testing.T) {
	t.Run("a known browser", func(t *testing.T) {
		h := newHasher(t, fastParams)
		f := newFixture(t, func(c *auth.Config) { c.NewDeviceVerification = auth.VerifyAlways }, usingHasher(h))
		f.addUser(t, "ann@example.com", "pw of ann", false)
		link := heldSignIn(t, f, "ann@example.com", "pw of ann", "192.0.2.66")
		known, err := f.svc.ConfirmSignIn(t.Context(), link, client("192.0.2.66"), "")
		if err != nil {
			t.Fatalf("confirming the sign-in link: %v", err)
		}
		res, loginErr := signInDuringSignOut(t, f, h, auth.LoginRequest{Email: "ann@example.com", Password: "pw of ann",
			Client: client("192.0.2.66"), DeviceCookie: known.Device.Value})
		if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "pw of ann",
			Client: client("192.0.2.66"), DeviceCookie: known.Device.Value}); !errors.Is(err, auth.ErrVerificationRequired) {
			t.Errorf("the same browser signing in after the sign-out: %v, want held for verification", err)
		}
		if loginErr == nil {
			if _, err := f.svc.Session(t.Context(), res.Session.Token); err == nil {
				t.Error("a session made by a sign-in under way during 'sign out everywhere' is live after it")
			}
		}
	})
	t.Run("a new browser", func(t *testing.T) {
		h := newHasher(t, fastParams)
		f := newFixture(t, nil, usingHasher(h))
		f.addUser(t, "ann@example.com", "pw of ann", false)
		res, loginErr := signInDuringSignOut(t, f, h, auth.LoginRequest{Email: "ann@example.com", Password: "pw of ann",
			Client: client("192.0.2.66")})
		if loginErr != nil {
			return // refused: nothing to outlive the sign-out
		}
		if _, err := f.svc.Session(t.Context(), res.Session.Token); err == nil {
			t.Error("a session made by a sign-in under way during 'sign out everywhere' is live after it")
		}
		var devices int
		if err := f.db.QueryRow(t.Context(), `SELECT count(*) FROM devices`).Scan(&devices); err != nil {
			t.Fatal(err)
		}
		if devices != 0 {
			t.Errorf("%d known devices after 'sign out everywhere', want none", devices)
		}
	})
}

// signInDuringSignOut signs in with req and, while the password is being
// verified (its hash held in h's slot, the account read), signs the
// account out everywhere; it returns the sign-in's answer.
func signInDuringSignOut(t *testing.T, f *fixture, h *auth.Hasher, req auth.LoginRequest) (auth.LoginResult, error) {
	t.Helper()
	release := auth.HoldHashes(h)
	defer release()
	var wg sync.WaitGroup
	var res auth.LoginResult
	var loginErr error
	wg.Go(func() { res, loginErr = f.svc.Login(context.Background(), req) })
	waitUntil(t, "the sign-in's password check in flight", func() bool { return h.Stats().Running == 1 })
	if err := f.svc.SignOutEverywhere(t.Context(), req.Email, "admin:root@example.com"); err != nil {
		t.Fatal(err)
	}
	release()
	wg.Wait()
	return res, loginErr
}

// TestMailedLinkEndsWithSignOutEverywhere: a held sign-in (right
// password, new browser) mails a link; after "sign out everywhere" the
// link makes neither a device nor a session.
func TestMailedLinkEndsWithSignOutEverywhere(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.NewDeviceVerification = auth.VerifyAlways })
	f.addUser(t, "ann@example.com", "pw of ann", false)
	link := heldSignIn(t, f, "ann@example.com", "pw of ann", "192.0.2.66")
	if err := f.svc.SignOutEverywhere(t.Context(), "ann@example.com", "admin:root@example.com"); err != nil {
		t.Fatal(err)
	}
	if res, err := f.svc.ConfirmSignIn(t.Context(), link, client("192.0.2.66"), ""); err == nil {
		t.Errorf("the link of a sign-in held before 'sign out everywhere' signs in after it (session %t, device %t)",
			res.Session.Token != "", res.Device.Value != "")
	}
}

// TestSecondStepBegunDuringEndOtherSessions: a sign-in of an account with
// an authenticator app, its password being verified while the owner
// signs the other browsers out, stores no second step after it, or one
// whose code signs no one in.
func TestSecondStepBegunDuringEndOtherSessions(t *testing.T) {
	h, err := auth.NewHasher(fastParams, 4, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *auth.Config) { c.MFA.Key = []byte("fedcba9876543210fedcba9876543210") },
		func(d *app.Deps) { d.Hasher = h })
	f.addUser(t, "ann@example.com", "pw of ann", false)
	mine, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "pw of ann", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	enr, err := f.svc.BeginTOTP(t.Context(), mine.Session, client("192.0.2.200"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ConfirmTOTP(t.Context(), auth.FactorChange{Session: mine.Session.Token, Password: "pw of ann",
		Client: client("192.0.2.1"), DeviceCookie: mine.Device.Value}, enr.ID, totpAt(t, enr.Secret, time.Now())); err != nil {
		t.Fatal(err)
	}
	release := auth.HoldHashes(h)
	defer release()
	var wg sync.WaitGroup
	var res auth.LoginResult
	var loginErr error
	wg.Go(func() {
		res, loginErr = f.svc.Login(context.Background(), auth.LoginRequest{Email: "ann@example.com", Password: "pw of ann", Client: client("192.0.2.66")})
	})
	// The account is read and its password is being verified, held.
	// A bound on a sign-in that never comes to its hash, which a loaded
	// machine may take seconds to.
	for deadline := time.Now().Add(30 * time.Second); h.Stats().Running == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sign-in's hash never began")
		}
	}
	if _, err := f.svc.EndOtherSessions(t.Context(), mine.Session, mine.Session.Token, client("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	release()
	wg.Wait()
	switch {
	case errors.Is(loginErr, auth.ErrInvalidCredentials):
		return // no step stored: nothing outlives the sign-out
	case !errors.Is(loginErr, auth.ErrMFARequired):
		t.Fatalf("sign-in: %v, want refused or a second step", loginErr)
	}
	step, err := f.svc.SecondStep(t.Context(), auth.SecondStepRequest{Token: res.MFA.Token, Binding: res.MFA.Binding,
		Code: totpAt(t, enr.Secret, time.Now().Add(30*time.Second)), Client: client("192.0.2.66")})
	if err != nil {
		return // refused: nothing outlives the sign-out
	}
	if _, err := f.svc.Session(t.Context(), step.Session.Token); err == nil {
		t.Error("a second step begun while 'sign out other browsers' ran signs in after it")
	}
}

// totpAt is the code of the authenticator-app key secret (base32) at at.
func totpAt(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	code, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestHeldMailAfterSignOutEverywhere: a sign-in held from a new browser
// whose mail is still queued when the account is signed out everywhere:
// the password is still known, so the mail goes, with its warning and
// reset link, but without a link that finishes the sign-in.
func TestHeldMailAfterSignOutEverywhere(t *testing.T) {
	for _, breached := range []bool{false, true} {
		t.Run(fmt.Sprintf("breached %t", breached), func(t *testing.T) {
			corpus := breachedtest.New(t)
			gate := &gatedMailer{gate: make(chan struct{}), started: make(chan struct{}, 8)}
			release := sync.OnceFunc(func() { close(gate.gate) })
			t.Cleanup(release)
			f := newFixture(t, func(c *auth.Config) { c.NewDeviceVerification = auth.VerifyAlways },
				withBreached(corpus.Checker(t)), func(d *app.Deps) { gate.Mailer = d.Mailer; d.Mailer = gate })
			f.addUser(t, "ann@example.com", "pw of ann", false)
			if breached {
				corpus.Add(t, "pw of ann") // leaked since it was set
			}
			// example.com's two mails at a time are taken, held: ann's
			// waits behind them.
			for _, b := range []string{"blocker1@example.com", "blocker2@example.com"} {
				f.addUser(t, b, "pw of "+b, false)
				if err := f.svc.RequestReset(t.Context(), b, client("192.0.2.9")); err != nil {
					t.Fatal(err)
				}
				<-gate.started
			}
			if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "pw of ann",
				Client: client("192.0.2.66")}); !errors.Is(err, auth.ErrVerificationRequired) {
				t.Fatalf("sign-in from a new browser: %v, want held", err)
			}
			if err := f.svc.SignOutEverywhere(t.Context(), "ann@example.com", "admin:root@example.com"); err != nil {
				t.Fatal(err)
			}
			release()
			body := f.mailBody(t, "ann@example.com")
			if !resetLink.MatchString(body) || signInLink.MatchString(body) {
				t.Errorf("mail after the sign-out: want a reset link and no sign-in link:\n%s", body)
			}
		})
	}
}

// gatedMailer holds every mail to an address starting "blocker" until
// gate is closed, so that the domain's other mails wait behind them.
type gatedMailer struct {
	auth.Mailer
	gate    chan struct{}
	started chan struct{}
}

func (m *gatedMailer) Send(ctx context.Context, msg auth.Message) error {
	if strings.HasPrefix(msg.To, "blocker") {
		m.started <- struct{}{}
		<-m.gate
	}
	return m.Mailer.Send(ctx, msg)
}

// heldSignIn signs in with the right password from a new browser at ip,
// which verification "always" holds, and returns the token of the link
// mailed to finish it.
func heldSignIn(t *testing.T, f *fixture, email, password, ip string) string {
	t.Helper()
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: email, Password: password,
		Client: client(ip)}); !errors.Is(err, auth.ErrVerificationRequired) {
		t.Fatalf("sign-in from a new browser: %v, want held", err)
	}
	m := signInLink.FindStringSubmatch(f.mailBody(t, email))
	if m == nil {
		t.Fatal("no sign-in link in the mail")
	}
	return m[1]
}

// TestRehashesAtOnceBothSignIn: two sign-ins with the right password
// whose stored hash has old parameters both rehash it; the second's
// write finds the hash replaced, by the first's hash of the same
// password, and must sign in all the same, not answer that the password
// was wrong.
func TestRehashesAtOnceBothSignIn(t *testing.T) {
	old, err := auth.NewHasher(fastParams, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := newHasher(t, slowParams)
	f := newFixture(t, nil, usingHasher(h))
	u := f.addUser(t, "ann@example.com", "placeholder password", false)
	oldHash, err := old.Hash(t.Context(), "pw of ann")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(t.Context(), `UPDATE users SET password_hash = $2 WHERE id = $1`, u.ID, oldHash); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "pw of ann", Client: client(fmt.Sprintf("192.0.2.%d", 60+i))})
			if err == nil {
				_, err = f.svc.Session(t.Context(), res.Session.Token)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("sign-in %d: %v, want signed in with a live session", i, err)
		}
	}
}
