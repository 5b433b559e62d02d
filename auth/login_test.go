package auth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/app"
)

func TestLoginSucceedsAndRotatesSession(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "Ann@Example.com", "correct horse", false)

	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "  ann@EXAMPLE.com", Password: "correct horse", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	sess, err := f.svc.Session(t.Context(), res.Session.Token)
	if err != nil || sess.Email != "ann@example.com" {
		t.Fatalf("Session: %+v, %v", sess, err)
	}
	if res.Device.Name == "" || res.Device.Value == "" {
		t.Fatalf("no device cookie: %+v", res.Device)
	}
	again, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "correct horse", Client: client("192.0.2.1"), OldSession: res.Session.Token})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Session(t.Context(), res.Session.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("old session after rotation: %v, want ErrNoSession", err)
	}
	if _, err := f.svc.Session(t.Context(), again.Session.Token); err != nil {
		t.Fatalf("new session: %v", err)
	}
	if err := f.svc.Logout(t.Context(), again.Session.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Session(t.Context(), again.Session.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("session after logout: %v", err)
	}
}

func TestLoginInvalidRequests(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct{ name, email, password string }{
		{"no email", "", "x"},
		{"no at", "ann.example.com", "x"},
		{"space inside", "ann @example.com", "x"},
		{"NUL", "ann\x00@example.com", "x"},
		{"invalid UTF-8", "ann\xff@example.com", "x"},
		{"too long", fmt.Sprintf("%0250d@example.com", 0), "x"},
		{"no password", "ann@example.com", ""},
		{"password over 1024 bytes", "ann@example.com", string(make([]byte, 1025))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: tc.email, Password: tc.password, Client: client("192.0.2.1")})
			if !errors.Is(err, auth.ErrInvalidRequest) {
				t.Fatalf("got %v, want ErrInvalidRequest", err)
			}
		})
	}
}

// TestLoginAccountLimitIsExact: 500 concurrent wrong passwords for one
// account from 50 addresses; exactly the limit reach password checking.
func TestLoginAccountLimitIsExact(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Lockout.Threshold = 1000 })
	f.addUser(t, "victim@example.com", "the real password", false)
	var invalid, limited atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 500 {
		wg.Go(func() {
			<-start
			_, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "victim@example.com", Password: "guess", Client: client(fmt.Sprintf("10.0.0.%d", i%50))})
			var le *auth.LimitedError
			switch {
			case errors.Is(err, auth.ErrInvalidCredentials):
				invalid.Add(1)
			case errors.As(err, &le) && le.RetryAfter > 0:
				limited.Add(1)
			default:
				t.Errorf("unexpected result: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if got, want := invalid.Load(), int64(f.cfg.Limits[auth.RuleLoginAccount].Count); got != want {
		t.Errorf("%d attempts reached password checking, want exactly %d", got, want)
	}
	if limited.Load() != 500-invalid.Load() {
		t.Errorf("%d limited, want the other %d", limited.Load(), 500-invalid.Load())
	}
}

// TestLockoutOnceEscalatesAndDeviceStillSignsIn covers the lockout's
// promises: it happens once and is recorded once under concurrent
// failures; a browser with a device cookie still signs in during it and
// leaves it alone; an unlock clears it; the next lockout is longer; a reset
// clears it.
func TestLockoutOnceEscalatesAndDeviceStillSignsIn(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
		c.Limits.SetCount(auth.RuleLoginIP, 1000)
	})
	f.addUser(t, "owner@example.com", "owner's password", false)
	good, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "owner@example.com", Password: "owner's password", Client: client("192.0.2.10")})
	if err != nil {
		t.Fatal(err)
	}

	attack := func(n int) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				_, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "owner@example.com", Password: fmt.Sprint("guess", i), Client: client("203.0.113.5")})
				if !errors.Is(err, auth.ErrInvalidCredentials) && !errors.Is(err, auth.ErrLimited) {
					t.Errorf("attack attempt: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	attack(50)

	lockouts, err := f.svc.ActiveLockouts(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, f, "SELECT count(*) FROM lockouts"); n != 1 || len(lockouts) != 1 || lockouts[0].Level != 1 || lockouts[0].Failures != f.cfg.Lockout.Threshold {
		t.Fatalf("after 50 concurrent failures: %d lockout rows, active %+v; want exactly one at level 1", n, lockouts)
	}
	if got := lockouts[0].LockedUntil.Sub(lockouts[0].LockedAt); got != f.cfg.Lockout.Duration {
		t.Errorf("first lockout lasts %v, want %v", got, f.cfg.Lockout.Duration)
	}

	// The attacker, and a fresh browser with the right password, are held.
	_, err = f.svc.Login(t.Context(), auth.LoginRequest{Email: "owner@example.com", Password: "owner's password", Client: client("192.0.2.11")})
	var le *auth.LimitedError
	if !errors.As(err, &le) || le.RetryAfter <= 0 || le.RetryAfter > f.cfg.Lockout.Duration+time.Second {
		t.Fatalf("fresh browser during lockout: %v, want ErrLimited with retry-after up to %v", err, f.cfg.Lockout.Duration)
	}
	// The owner's browser, with its device cookie, is not.
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "owner@example.com", Password: "owner's password", Client: client("192.0.2.10"), DeviceCookie: good.Device.Value}); err != nil {
		t.Fatalf("device-cookie browser during lockout: %v, want success", err)
	}
	// That success left the lockout as it was: the attacker sees nothing.
	if after, _ := f.svc.ActiveLockouts(t.Context(), 10); len(after) != 1 || after[0] != lockouts[0] {
		t.Fatalf("lockouts after the owner's sign-in: %+v, want %+v unchanged", after, lockouts)
	}
	// An admin unlock clears it.
	if was, err := f.svc.Unlock(t.Context(), "OWNER@example.com", "admin:sec@example.com"); err != nil || !was {
		t.Fatalf("Unlock: %v, %v", was, err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "owner@example.com", Password: "owner's password", Client: client("192.0.2.12")}); err != nil {
		t.Fatalf("fresh browser after unlock: %v", err)
	}
	if n := countRows(t, f, "SELECT count(*) FROM lockouts WHERE cleared_by = 'admin:sec@example.com'"); n != 1 {
		t.Errorf("%d lockouts cleared by the admin, want 1", n)
	}

	// A second lockout escalates.
	attack(50)
	lockouts, _ = f.svc.ActiveLockouts(t.Context(), 10)
	if len(lockouts) != 1 || lockouts[0].Level != 2 || lockouts[0].LockedUntil.Sub(lockouts[0].LockedAt) != 2*f.cfg.Lockout.Duration {
		t.Fatalf("second lockout: %+v, want level 2 lasting %v", lockouts, 2*f.cfg.Lockout.Duration)
	}
	// A password reset clears it too.
	token := requestResetToken(t, f, "owner@example.com")
	if err := f.svc.ConfirmReset(t.Context(), token, "a brand new password", client("192.0.2.13")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "owner@example.com", Password: "a brand new password", Client: client("192.0.2.14")}); err != nil {
		t.Fatalf("sign-in after reset: %v", err)
	}
	if n := countRows(t, f, "SELECT count(*) FROM lockouts WHERE cleared_by = 'reset'"); n != 1 {
		t.Errorf("%d lockouts cleared by reset, want 1", n)
	}
}

// TestLockoutAppliesToUnknownAccounts: an identifier without an account
// locks exactly like a real one, so a lockout reveals nothing.
func TestLockoutAppliesToUnknownAccounts(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 1000) })
	// Distinct guesses: a repeated one counts once.
	for i := range f.cfg.Lockout.Threshold {
		if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "nobody@example.com", Password: fmt.Sprint("guess ", i), Client: client("192.0.2.1")}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("got %v", err)
		}
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "nobody@example.com", Password: "another guess", Client: client("192.0.2.1")}); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("after the threshold: %v, want ErrLimited", err)
	}
	if n := countRows(t, f, "SELECT count(*) FROM lockouts WHERE account_key = 'nobody@example.com' AND user_id IS NULL"); n != 1 {
		t.Fatalf("%d lockout rows for the unknown account, want 1", n)
	}
}

func countRows(t *testing.T, f *fixture, sql string) int {
	t.Helper()
	var n int
	if err := f.db.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// lockByGuesses locks email out by a threshold of wrong passwords, and
// checks that the lockout log lists the one lock.
func lockByGuesses(t *testing.T, f *fixture, email string) {
	t.Helper()
	for i := range f.cfg.Lockout.Threshold {
		f.svc.Login(t.Context(), auth.LoginRequest{Email: email, Password: fmt.Sprint("guess ", i), Client: client("192.0.2.1")})
	}
	if l, _ := f.svc.ActiveLockouts(t.Context(), 10); len(l) != 1 {
		t.Fatalf("lockouts: %+v, want one", l)
	}
}

// forgetRedis deletes every key of f's limits, as a Redis restarted
// without its data would have lost them.
func forgetRedis(t *testing.T, f *fixture) {
	t.Helper()
	keys, err := f.rdb.Keys(t.Context(), f.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		f.rdb.Del(t.Context(), keys...)
	}
}

// TestUnlockEndsALockoutRedisForgot: Redis restarted and lost the lock, but
// Postgres still lists it; Unlock ends the listed lockout too.
func TestUnlockEndsALockoutRedisForgot(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 1000) })
	lockByGuesses(t, f, "gone@example.com")
	forgetRedis(t, f)
	if was, err := f.svc.Unlock(t.Context(), "gone@example.com", "admin:sec@example.com"); err != nil || !was {
		t.Fatalf("Unlock: %v, %v; want it to end the listed lockout", was, err)
	}
	if l, _ := f.svc.ActiveLockouts(t.Context(), 10); len(l) != 0 {
		t.Fatalf("lockouts after Unlock: %+v, want none", l)
	}
}

// TestResetEndsALockoutRedisForgot: the lockout log lists a lock the
// limits here do not hold (made in another replica's process while it was
// cut off from Redis, or lost by a restart); a reset ends it there too, so
// that no failback or outage holds it again after the reset.
func TestResetEndsALockoutRedisForgot(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 1000) })
	f.addUser(t, "gone@example.com", "old password", false)
	lockByGuesses(t, f, "gone@example.com")
	forgetRedis(t, f)
	token := requestResetToken(t, f, "gone@example.com")
	if err := f.svc.ConfirmReset(t.Context(), token, "new password 1", client("192.0.2.1")); err != nil {
		t.Fatalf("ConfirmReset: %v", err)
	}
	if l, _ := f.svc.ActiveLockouts(t.Context(), 10); len(l) != 0 {
		t.Fatalf("lockouts after the reset: %+v, want none", l)
	}
}

// failingUnlocks is a Redis hook that answers every script run on an
// identity's lock key first (an unlock: clear.lua) with an error reply,
// while on is set.
type failingUnlocks struct{ on *atomic.Bool }

func (failingUnlocks) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h failingUnlocks) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if h.on.Load() && (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(args) > 3 && strings.HasSuffix(fmt.Sprint(args[3]), ":lock") {
			cmd.SetErr(refusal("ERR unlock refused by the test"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (failingUnlocks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// refusal is an error reply from Redis.
type refusal string

func (e refusal) Error() string { return string(e) }
func (refusal) RedisError()     {}

// TestResetKeepsTheLogWhenTheUnlockFails: a reset whose unlock Redis
// refused leaves the lock in force there, and the lockout log listing it,
// so that the dashboard shows it and an administrator can end it.
func TestResetKeepsTheLogWhenTheUnlockFails(t *testing.T) {
	var refuse atomic.Bool
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 1000) },
		func(d *app.Deps) { d.Redis.AddHook(failingUnlocks{&refuse}) })
	f.addUser(t, "kept@example.com", "old password", false)
	lockByGuesses(t, f, "kept@example.com")
	token := requestResetToken(t, f, "kept@example.com")
	refuse.Store(true)
	if err := f.svc.ConfirmReset(t.Context(), token, "new password 1", client("192.0.2.1")); err != nil {
		t.Fatalf("ConfirmReset: %v", err)
	}
	if l, _ := f.svc.ActiveLockouts(t.Context(), 10); len(l) != 1 {
		t.Fatalf("lockouts after a reset whose unlock Redis refused: %+v, want the one still in force", l)
	}
}

// hangUpAtUnlock is a Redis hook that cancels the request of the first
// unlock (a script run on an identity's lock key first) as it is sent: a
// client hanging up once its reset is committed.
type hangUpAtUnlock struct {
	hangUp atomic.Pointer[context.CancelFunc]
}

func (*hangUpAtUnlock) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *hangUpAtUnlock) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(args) > 3 && strings.HasSuffix(fmt.Sprint(args[3]), ":lock") {
			if cancel := h.hangUp.Swap(nil); cancel != nil {
				(*cancel)()
			}
		}
		return next(ctx, cmd)
	}
}
func (*hangUpAtUnlock) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestResetEndsTheLockoutWhenTheClientHangsUp: the password is reset,
// so the lockout ends, however soon after that its client goes.
func TestResetEndsTheLockoutWhenTheClientHangsUp(t *testing.T) {
	hook := &hangUpAtUnlock{}
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 1000) },
		func(d *app.Deps) { d.Redis.AddHook(hook) })
	f.addUser(t, "gone@example.com", "old password", false)
	lockByGuesses(t, f, "gone@example.com")
	token := requestResetToken(t, f, "gone@example.com")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	hook.hangUp.Store(&cancel)
	if err := f.svc.ConfirmReset(ctx, token, "new password 1", client("192.0.2.1")); err != nil {
		t.Fatalf("ConfirmReset: %v", err)
	}
	if l, _ := f.svc.ActiveLockouts(t.Context(), 10); len(l) != 0 {
		t.Fatalf("lockouts after a reset whose client hung up: %+v, want none", l)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "gone@example.com", Password: "new password 1", Client: client("192.0.2.7")}); err != nil {
		t.Fatalf("sign-in with the new password: %v", err)
	}
}

// TestRehashOnSignIn: a hash made with other parameters is replaced, on
// the next successful sign-in, by one with the service's parameters.
func TestRehashOnSignIn(t *testing.T) {
	f := newFixture(t, nil)
	u := f.addUser(t, "old@example.com", "correct horse", false)
	older, err := auth.NewHasher(auth.Params{Memory: 32, Time: 3, Threads: 1, SaltLen: 16, KeyLen: 32}, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	oldHash, err := older.Hash(t.Context(), "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(t.Context(), `UPDATE users SET password_hash = $2 WHERE id = $1`, u.ID, oldHash); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "old@example.com", Password: "correct horse", Client: client("192.0.2.1")}); err != nil {
		t.Fatalf("sign-in with the old hash: %v", err)
	}
	var stored string
	if err := f.db.QueryRow(t.Context(), `SELECT password_hash FROM users WHERE id = $1`, u.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored == oldHash || !strings.HasPrefix(stored, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("stored hash %q, want one with the service's parameters m=64,t=1,p=1", stored)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "old@example.com", Password: "correct horse", Client: client("192.0.2.1")}); err != nil {
		t.Fatalf("sign-in with the new hash: %v", err)
	}
}

// TestRejectionsAreCoalesced: a flood of rejections for one account from
// one network is a few rows with counts, not a row per request, and every
// rejection is counted exactly once.
func TestRejectionsAreCoalesced(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 1); c.RejectionMemory = 0 })
	for range 201 {
		f.svc.Login(t.Context(), auth.LoginRequest{Email: "flood@example.com", Password: "x", Client: client("192.0.2.7")})
	}
	if err := f.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var rows, total int
	err := f.db.QueryRow(t.Context(), `SELECT count(*), coalesce(sum(coalesce((detail->>'count')::int, 1)), 0)
		FROM security_events WHERE kind = 'login_rejected' AND account_key = 'flood@example.com'`).Scan(&rows, &total)
	if err != nil {
		t.Fatal(err)
	}
	if total != 200 || rows > auth.MaxEventRowsPerNetwork {
		t.Fatalf("%d rows counting %d rejections; want exactly the 200 rejections in at most %d rows", rows, total, auth.MaxEventRowsPerNetwork)
	}
	t.Logf("200 rejections in %d rows", rows)
}

// TestSignInWithAnotherNormalisationForm: the password set as "é" in one
// code point signs in when typed as "e" and a combining accent.
func TestSignInWithAnotherNormalisationForm(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "zoe@example.com", "caf\u00e9 cr\u00e8me", false)
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "zoe@example.com", Password: "cafe\u0301 cre\u0300me", Client: client("192.0.2.1")}); err != nil {
		t.Fatalf("sign-in with the decomposed form: %v", err)
	}
}
