package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/app"
)

// turningWatch is attack mode coming on during a sign-in: off for the
// first question, on from the second, and at the first it runs atFirst,
// if set (attack mode's start, seen by this replica or another).
type turningWatch struct {
	asked   atomic.Int32
	offFor  int32
	atFirst func()
}

func (w *turningWatch) Observe(auth.SignInAttempt) {}
func (w *turningWatch) Active() bool {
	n := w.asked.Add(1)
	if n == 1 && w.atFirst != nil {
		w.atFirst()
	}
	return n > w.offFor
}

// TestAttackModeDuringHashingHolds: attack mode comes on while a new
// browser's right password is hashed; the sign-in is held rather than
// given a session.
func TestAttackModeDuringHashingHolds(t *testing.T) {
	w := &turningWatch{offFor: 1}
	s := authtest.NewService(t, nil, func(d *auth.Deps) { d.Attack = w })
	ann, err := s.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "the password", Client: client("192.0.2.1")})
	if err != auth.ErrVerificationRequired {
		t.Fatalf("a right password while attack mode came on: %v, want ErrVerificationRequired", err)
	}
	if n := s.Store.Sessions(ann.ID); n != 0 {
		t.Errorf("%d sessions, want none", n)
	}
}

// TestAttackModeDuringHashingHoldsEveryAnswer: attack mode comes on while
// new browsers' passwords are hashed; the right one is held, and so are a
// wrong one and an unknown account, so that the answers of the sign-ins
// in flight as attack mode starts do not tell the right password apart.
func TestAttackModeDuringHashingHoldsEveryAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, email, password string
	}{
		{"right password", "ann@example.com", "the password"},
		{"wrong password", "ann@example.com", "a wrong password"},
		{"unknown account", "nobody@example.com", "the password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &turningWatch{offFor: 1}
			s := authtest.NewService(t, nil, func(d *auth.Deps) { d.Attack = w })
			if _, err := s.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli"); err != nil {
				t.Fatal(err)
			}
			_, err := s.Login(t.Context(), auth.LoginRequest{Email: tc.email, Password: tc.password, Client: client("192.0.2.1")})
			if !errors.Is(err, auth.ErrVerificationRequired) {
				t.Fatalf("%s while attack mode came on: %v, want ErrVerificationRequired", tc.name, err)
			}
		})
	}
}

// TestAttackModeStartSignsOutTwice: a sign-in that read attack mode off
// (on another replica, say) writes its device and session after the
// start's first sign-out; the second pass ends them.
func TestAttackModeStartSignsOutTwice(t *testing.T) {
	w := &turningWatch{offFor: 1 << 30} // the late sign-in never sees it on
	s := authtest.NewService(t, nil, func(d *auth.Deps) { d.Attack = w })
	for _, email := range []string{"ann@example.com", "bob@example.com"} {
		if _, err := s.CreateUser(t.Context(), email, "the password", false, "cli"); err != nil {
			t.Fatal(err)
		}
	}
	since := time.Now().Add(-30 * time.Second)
	// Ann signed in from a new browser a moment before attack mode.
	if _, err := s.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "the password", Client: client("192.0.2.1")}); err != nil {
		t.Fatal(err)
	}
	// Bob's sign-in asks while attack mode starts: the first pass runs
	// then, and his session is written after it.
	var first []auth.User
	var sweepErr error
	w.asked.Store(0)
	w.atFirst = func() { first, sweepErr = s.SignOutNewDevices(t.Context(), since, nil) }
	late, err := s.Login(t.Context(), auth.LoginRequest{Email: "bob@example.com", Password: "the password", Client: client("192.0.2.2")})
	if err != nil || sweepErr != nil {
		t.Fatal(err, sweepErr)
	}
	if len(first) != 1 || first[0].Email != "ann@example.com" {
		t.Fatalf("the first pass signed out %+v, want ann", first)
	}
	if _, err := s.Session(t.Context(), late.Session.Token); err != nil {
		t.Fatalf("bob's session should have outlived the first pass: %v", err)
	}
	again, err := s.SignOutNewDevices(t.Context(), since, first)
	if err != nil || len(again) != 1 || again[0].Email != "bob@example.com" {
		t.Fatalf("the second pass: %+v, %v; want bob", again, err)
	}
	if _, err := s.Session(t.Context(), late.Session.Token); err != auth.ErrNoSession {
		t.Errorf("bob's session after the second pass: %v, want ErrNoSession", err)
	}
}

// TestAttackModeKeepsVerifiedDevices: a browser that confirms its held
// sign-in by the mailed link after attack mode began is verified, not one
// that slipped in before every replica knew; the start's two passes,
// which forget the browsers new since then, keep it and its session.
func TestAttackModeKeepsVerifiedDevices(t *testing.T) {
	f := newVerifyFixture(t, auth.VerifyInAttack)
	f.watch.active.Store(true)
	if _, err := f.CreateUser(t.Context(), "ann@example.com", "the password", false, "cli"); err != nil {
		t.Fatal(err)
	}
	since := f.clock()
	f.advance(time.Second)
	if _, err := f.signIn(t, "ann@example.com", "the password", "192.0.2.1", ""); !errors.Is(err, auth.ErrVerificationRequired) {
		t.Fatalf("a new browser in attack mode: %v, want ErrVerificationRequired", err)
	}
	res, err := f.ConfirmSignIn(t.Context(), signInToken(t, f.Mail, "ann@example.com"), client("192.0.2.1"), "")
	if err != nil {
		t.Fatalf("ConfirmSignIn: %v", err)
	}
	for pass := range 2 {
		if gone, err := f.SignOutNewDevices(t.Context(), since, nil); err != nil || len(gone) != 0 {
			t.Fatalf("pass %d signed out %+v, %v; want nobody", pass+1, gone, err)
		}
	}
	if _, err := f.Session(t.Context(), res.Session.Token); err != nil {
		t.Errorf("the confirmed browser's session after the passes: %v", err)
	}
	if _, err := f.signIn(t, "ann@example.com", "the password", "192.0.2.1", res.Device.Value); err != nil {
		t.Errorf("the confirmed browser signing in again: %v, want a session", err)
	}
}

// TestRunEndsAfterAttackStartsSecondPass: attack mode's start signs out
// the browsers new since it began twice, the second time a moment later;
// a service stopped in that moment runs the second pass before its Run
// returns, while its stores are open and its events are still written,
// rather than after, on a database pool closed by then. The session
// another replica, which did not know of attack mode yet, wrote after the
// first pass is ended by the time Run returns.
func TestRunEndsAfterAttackStartsSecondPass(t *testing.T) {
	f := buildFixture(t, nil, func(d *app.Deps) { d.Attack = attack.DefaultConfig() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f.addUser(t, "ann@example.com", "the password", false)
	f.addUser(t, "bob@example.com", "the password", false)
	early, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "the password", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}

	// A flood of unknown accounts trips the detector; the tick that
	// records it runs the first pass before it returns.
	now := time.Now()
	for i := range 2 * attack.DefaultConfig().UnknownAccounts {
		f.attack.Observe(auth.SignInAttempt{At: now, Account: fmt.Sprintf("x%d@example.com", i),
			Client: auth.Client{Addr: netip.AddrFrom4([4]byte{10, 0, byte(i), 1})}, Outcome: auth.OutcomeUnknownAccount})
	}
	if err := f.attack.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !f.attack.Active() {
		t.Fatal("attack mode did not start")
	}
	if _, err := f.svc.Session(t.Context(), early.Session.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("the session of a browser new before attack mode after its start: %v, want ErrNoSession", err)
	}
	// Another replica, whose watch has not read attack mode yet, signs a
	// new browser in after the first pass.
	late, err := serviceOn(t, f, nil).Login(t.Context(), auth.LoginRequest{Email: "bob@example.com", Password: "the password", Client: client("192.0.2.2")})
	if err != nil {
		t.Fatal(err)
	}

	cancel()
	<-done
	if _, err := f.svc.Session(t.Context(), late.Session.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("a session written after the first pass, once Run returned: %v, want ErrNoSession (the second pass ran)", err)
	}
	var n int
	if err := f.db.QueryRow(t.Context(), `SELECT count(*) FROM security_events WHERE kind = $1 AND account_key = 'bob@example.com'`,
		auth.EventNewDeviceSignedOut).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d %s events of bob stored once Run returned, want 1", n, auth.EventNewDeviceSignedOut)
	}
}
