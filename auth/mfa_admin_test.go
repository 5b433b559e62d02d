package auth_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestAdminRemovesConfirmedFactorsOnly: an administrator's removal of an
// account's factors counts, records and mails the factors its owner had,
// not a key the owner began to set up and never confirmed: an account with
// such a key alone had no factor to remove, and its owner is not told
// that an administrator removed every one.
func TestAdminRemovesConfirmedFactorsOnly(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: ann.Email, Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	// A key set up and left unconfirmed.
	if _, err := f.svc.BeginTOTP(ctx, res.Session, client("192.0.2.200")); err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.RemoveFactors(ctx, "admin:root@example.com", ann.Email); err != nil || n != 0 {
		t.Errorf("removing an account's factors when it has an unconfirmed key alone: %d, %v; want 0 removed", n, err)
	}
	// A confirmed one beside another left unconfirmed.
	enrol, err := f.svc.BeginTOTP(ctx, res.Session, client("192.0.2.200"))
	if err != nil {
		t.Fatal(err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}
	if _, err := f.svc.ConfirmTOTP(ctx, ch, enrol.ID, totpAt(t, enrol.Secret, time.Now())); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.BeginTOTP(ctx, res.Session, client("192.0.2.200")); err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.RemoveFactors(ctx, "admin:root@example.com", ann.Email); err != nil || n != 1 {
		t.Errorf("removing an account's one factor, another being set up: %d, %v; want 1 removed", n, err)
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	events := eventsOfKinds(t, f, auth.EventFactorRemoved)
	if len(events) != 1 || !strings.Contains(events[0].detail, `"count": "1"`) {
		t.Errorf("factor_removed events: %+v; want one, of 1 factor", events)
	}
}

// TestAdminUnlockEndsTheSecondStepLock: an administrator's unlock ends the
// lock of the account's second step as well as its password's lockout,
// so that an owner who mistyped their codes is not left waiting up to a
// day for a lock that "user unlock" called "not locked".
func TestAdminUnlockEndsTheSecondStepLock(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleMFAAccount, 1) })
	ctx := t.Context()
	secret := enrolTOTP(t, f, "ann@example.com")
	step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("sign-in with a factor: %v, want ErrMFARequired", err)
	}
	answer := func(code string) error {
		_, err := f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding, Code: code,
			Client: client("192.0.2.7"), Cookie: func(string) string { return "" }})
		return err
	}
	// The next time step's code: this one's confirmed the factor.
	right := totpAt(t, secret, time.Now().Add(30*time.Second))
	wrong := wrongCode(right)
	if err := answer(wrong); !errors.Is(err, auth.ErrInvalidCode) {
		t.Fatalf("a wrong code: %v, want ErrInvalidCode", err)
	}
	if err := answer(right); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("the right code after the lock: %v, want ErrLimited", err)
	}
	if was, err := f.svc.Unlock(ctx, "ann@example.com", "cli"); err != nil || !was {
		t.Fatalf("Unlock of a locked second step: %v, %v; want it reported locked", was, err)
	}
	if err := answer(right); err != nil {
		t.Fatalf("the right code after the unlock: %v, want a session", err)
	}
	if was, err := f.svc.Unlock(ctx, "ann@example.com", "cli"); err != nil || was {
		t.Errorf("Unlock of an account with nothing locked: %v, %v; want it reported not locked", was, err)
	}
}

// TestSecondStepLockIsListedUntilUnlocked: the lock of an account's second
// step is in the lockout log, so that the dashboard lists it and the
// account's page offers to unlock it, as it does a password's lockout: an
// owner who mistyped their codes is otherwise locked for up to a day with
// nothing an administrator sees to lift. Each lock is listed apart, so
// neither hides the other. A password reset, which proves the mailbox and
// not the second factor, ends the password's alone; an administrator's
// unlock ends both.
func TestSecondStepLockIsListedUntilUnlocked(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleMFAAccount, 1) })
	ctx := t.Context()
	secret := enrolTOTP(t, f, "ann@example.com")
	ann, err := f.svc.UserByEmail(ctx, "ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("sign-in with a factor: %v, want ErrMFARequired", err)
	}
	right := totpAt(t, secret, time.Now().Add(30*time.Second))
	wrong := wrongCode(right)
	if _, err := f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding, Code: wrong,
		Client: client("192.0.2.7"), Cookie: func(string) string { return "" }}); !errors.Is(err, auth.ErrInvalidCode) {
		t.Fatalf("a wrong code: %v, want ErrInvalidCode", err)
	}
	if _, err := f.svc.LockUser(ctx, ann.ID, time.Hour, "admin:root@example.com"); err != nil {
		t.Fatal(err)
	}
	// listed checks the steps of ann's locks the dashboard lists (""
	// for the password's), and those her page shows.
	listed := func(when string, want []string) {
		t.Helper()
		locks, err := f.svc.ActiveLockouts(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, l := range locks {
			if l.Account != ann.Email {
				continue
			}
			steps = append(steps, l.Step)
			if l.UserID != ann.ID || l.Level != 1 || !l.LockedUntil.After(l.LockedAt) {
				t.Errorf("%s: a lockout listed = %+v; want ann's, level 1", when, l)
			}
		}
		slices.Sort(steps)
		if !slices.Equal(steps, want) {
			t.Errorf("%s: the dashboard lists ann's locks %q, want %q", when, steps, want)
		}
		d, err := f.svc.UserDetail(ctx, ann.ID)
		if err != nil {
			t.Fatal(err)
		}
		page := []string{}
		if d.Locked {
			page = append(page, "")
		}
		for _, l := range d.SecondStepLocks {
			page = append(page, l.Step)
		}
		if !slices.Equal(page, append([]string{}, want...)) {
			t.Errorf("%s: the account's page shows the locks %q, want %q", when, page, want)
		}
	}
	listed("with the password and the second step locked", []string{"", auth.SecondStepOwn})

	token := requestResetToken(t, f, ann.Email)
	if err := f.svc.ConfirmReset(ctx, token, "a new password 123", client("192.0.2.7")); err != nil {
		t.Fatal(err)
	}
	listed("after a password reset", []string{auth.SecondStepOwn})

	if was, err := f.svc.Unlock(ctx, ann.Email, "admin:root@example.com"); err != nil || !was {
		t.Fatalf("Unlock of a locked second step: %v, %v; want it reported locked", was, err)
	}
	listed("after the unlock", []string{})
}

// TestHeldStepLockListedApart: the lock of a held answer's codes, which
// anyone with the account's address may cause, is listed as the held
// sign-ins' (with no user: not the owner's doing), and a right code whose
// own count reached the threshold lifts it (and the own step's, which a
// right password's held code counts towards too) and ends their rows.
func TestHeldStepLockListedApart(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleMFAAccount, 1) })
	ctx := t.Context()
	_, _, codes := heldInAttackMode(t, f)
	answer := func(ip, password, code string) error {
		t.Helper()
		step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: password, Client: client(ip)})
		if !errors.Is(err, auth.ErrVerificationRequired) || step.MFA.Token == "" {
			t.Fatalf("sign-in from a new browser in attack mode: %v, %+v; want a held second step", err, step.MFA)
		}
		_, err = f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding,
			Code: code, Client: client(ip), Cookie: func(string) string { return "" }})
		return err
	}
	annLocks := func() []auth.Lockout {
		t.Helper()
		// A held code's lock rows are written past its answer.
		if err := f.svc.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		locks, err := f.svc.ActiveLockouts(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(locks, func(l auth.Lockout) bool { return l.Account != "ann@example.com" })
	}
	// Counted at the threshold, and right.
	if err := answer("198.51.100.7", "password123", codes[0]); err != nil {
		t.Fatalf("a held step's right code: %v", err)
	}
	if locks := annLocks(); len(locks) != 0 {
		t.Errorf("after a right held code counted at the threshold, listed: %+v; want none", locks)
	}
	// A stranger's, without the password: the held answers' lock alone.
	if err := answer("198.51.100.8", "not the password", "000000"); !errors.Is(err, auth.ErrInvalidCode) {
		t.Fatalf("a held step's wrong code: %v, want ErrInvalidCode", err)
	}
	if locks := annLocks(); len(locks) != 1 || locks[0].Step != auth.SecondStepHeld || locks[0].UserID != 0 {
		t.Errorf("after a wrong held code, listed: %+v; want the held sign-ins' lock, of no user", locks)
	}
	// Lifting the lock strangers caused leaves the password's lockout.
	ann, err := f.svc.UserByEmail(ctx, "ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.LockUser(ctx, ann.ID, time.Hour, "admin:root@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.UnlockStep(ctx, "ann@example.com", "no such step", "admin:root@example.com"); !errors.Is(err, auth.ErrNoSuchLock) {
		t.Errorf("UnlockStep of a lock no account has: %v, want ErrNoSuchLock", err)
	}
	if was, err := f.svc.UnlockStep(ctx, "ann@example.com", auth.SecondStepHeld, "admin:root@example.com"); err != nil || !was {
		t.Fatalf("UnlockStep of the held sign-ins' lock: %v, %v; want it reported locked", was, err)
	}
	if locks := annLocks(); len(locks) != 1 || locks[0].Step != "" {
		t.Errorf("after lifting the held sign-ins' lock, listed: %+v; want the password's lockout alone", locks)
	}
	if d, err := f.svc.UserDetail(ctx, ann.ID); err != nil || !d.Locked || len(d.SecondStepLocks) != 0 {
		t.Errorf("after lifting the held sign-ins' lock, the account's page: %+v, %v; want its password locked alone", d, err)
	}
}

// TestHeldCodeAnswersBeforeItsLockRows: the answer to a held token's code
// that reaches a lock does not wait for the lock's row in the lockout log.
// A right password's token reaches one lock more than a wrong one's (the
// owner's own step's, besides the held answers'), so a row written before
// the answer would show in its time which passwords were right. The
// lockout log is held locked meanwhile: a code whose answer waited for
// its rows would wait for the lock.
func TestHeldCodeAnswersBeforeItsLockRows(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleMFAAccount, 1) })
	ctx := t.Context()
	heldInAttackMode(t, f)
	// Each on an address of its own, so that each reaches its own lock: a
	// right password (the held answers' lock and the own step's) and a
	// wrong one (the held answers' alone). The log is held locked for
	// each code in turn: its rows, waiting, hold connections of the pool.
	for i, try := range []struct{ email, password string }{
		{"ann@example.com", "password123"}, {"nobody@example.com", "not the password"},
	} {
		ip := fmt.Sprintf("198.51.100.%d", 20+i)
		step, err := f.svc.Login(ctx, auth.LoginRequest{Email: try.email, Password: try.password, Client: client(ip)})
		if !errors.Is(err, auth.ErrVerificationRequired) || step.MFA.Token == "" {
			t.Fatalf("sign-in from a new browser in attack mode: %v, %+v; want a held second step", err, step.MFA)
		}
		tx, err := f.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE lockouts IN EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		answered := make(chan error, 1)
		go func() {
			_, err := f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding,
				Code: "000000", Client: client(ip), Cookie: func(string) string { return "" }})
			answered <- err
		}()
		select {
		case err := <-answered:
			if !errors.Is(err, auth.ErrInvalidCode) {
				t.Errorf("%s: a held code at the lock: %v, want ErrInvalidCode", try.password, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: a held code at the lock waited for its row in the lockout log", try.password)
			<-answered
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	locks, err := f.svc.ActiveLockouts(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, l := range locks {
		listed[l.Account+" "+l.Step] = true
	}
	for _, want := range []string{"ann@example.com " + auth.SecondStepHeld, "ann@example.com " + auth.SecondStepOwn,
		"nobody@example.com " + auth.SecondStepHeld} {
		if !listed[want] {
			t.Errorf("once the log is free: listed %+v; want %s", locks, want)
		}
	}
}
