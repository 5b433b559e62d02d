package auth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/ratelimit"
)

// readCountingStore counts the accounts read: a sign-in that reads none
// hashes nothing either, as hashing follows the read.
type readCountingStore struct {
	*authtest.Store
	reads atomic.Int64
}

func (s *readCountingStore) UserByEmail(ctx context.Context, email string) (auth.User, error) {
	s.reads.Add(1)
	return s.Store.UserByEmail(ctx, email)
}

// logBuffer keeps what a logger writes, for any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newSprayingService is a service whose only binding limits are the
// spraying lock and the lockouts, with a store that counts account reads
// and a log kept in logs.
func newSprayingService(t *testing.T, logs *logBuffer) (*authtest.Service, *readCountingStore) {
	t.Helper()
	store := &readCountingStore{Store: authtest.NewStore()}
	s := authtest.NewService(t, func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleLoginIP, 10000)
		c.Limits.SetCount(auth.RuleLoginNetwork, 10000)
		c.Limits.SetCount(auth.RuleLoginAccount, 10000)
		// Not the lockout's threshold or duration, so that the spraying
		// lock is seen to follow its own settings.
		c.SprayAccounts, c.SprayWindow = 5, 30*time.Minute
	}, withStore(store), func(d *auth.Deps) { d.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	return s, store
}

// TestSprayedPasswordRefused: a password that failed on SprayAccounts
// distinct accounts is refused for every account, the one it is right
// for included, before the account is read or anything hashed; fewer
// accounts, or one account retried, do not trigger it, and other
// passwords are unaffected.
func TestSprayedPasswordRefused(t *testing.T) {
	var logs logBuffer
	s, store := newSprayingService(t, &logs)
	n := s.Config.SprayAccounts
	// Composed; its decomposed form signs in alike and is sprayed alike.
	const sprayed, decomposed = "Summer café!", "Summer cafe\u0301!"
	if _, err := s.Service.CreateUser(t.Context(), "owner@example.com", sprayed, false, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.CreateUser(t.Context(), "other@example.com", "correct horse", false, "cli"); err != nil {
		t.Fatal(err)
	}
	login := func(email, password, ip string) error {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: password, Client: client(ip)})
		return err
	}

	// One account retried many times with the password counts once. As
	// many as fill the network's event budget, so that the spraying
	// event is seen not to be folded with the failures.
	for i := range auth.EventRowsPerNetwork + 5 {
		if err := login("victim0@example.com", sprayed, "192.0.2.1"); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("retry %d on one account: %v; want wrong credentials", i+1, err)
		}
	}
	// n-1 distinct accounts in all: not yet sprayed.
	for i := 1; i < n-1; i++ {
		if err := login(fmt.Sprintf("victim%d@example.com", i), sprayed, fmt.Sprintf("192.0.2.%d", 10+i)); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("account %d of %d: %v; want wrong credentials", i+1, n-1, err)
		}
	}
	if err := login("owner@example.com", sprayed, "198.51.100.1"); err != nil {
		t.Fatalf("the owner after %d accounts failed with the password: %v; want signed in", n-1, err)
	}
	// The n-th distinct account locks the password.
	if err := login(fmt.Sprintf("victim%d@example.com", n-1), sprayed, "192.0.2.99"); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("account %d: %v; want wrong credentials", n, err)
	}
	// The owner's new-device notice reads the account as its mail is
	// written, in the background: done before the count starts.
	mailIdle(t, s.Service)
	before := store.reads.Load()
	for i, email := range []string{"owner@example.com", "fresh@example.com", "victim0@example.com"} {
		password := sprayed
		if i == 1 {
			password = decomposed
		}
		err := login(email, password, "203.0.113.7")
		var limited *auth.LimitedError
		if !errors.As(err, &limited) || limited.RetryAfter <= s.Config.SprayWindow-time.Minute || limited.RetryAfter > s.Config.SprayWindow {
			t.Fatalf("the sprayed password on %s: %v; want refused for the window, %s", email, err, s.Config.SprayWindow)
		}
	}
	if got := store.reads.Load() - before; got != 0 {
		t.Errorf("a sprayed password read %d accounts; want none (refused before any read or hashing)", got)
	}
	// Other passwords are unaffected, on the same accounts.
	if err := login("other@example.com", "correct horse", "203.0.113.7"); err != nil {
		t.Errorf("another password: %v; want signed in", err)
	}
	if err := login("victim0@example.com", "another guess", "203.0.113.7"); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Errorf("another wrong password: %v; want wrong credentials", err)
	}

	// The lock is a rejection by login_password, one password_sprayed
	// event without the password, and no account lockout.
	if err := s.Service.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var sprayedEvents, rejections, lockouts int
	for _, e := range s.Events.Events() {
		switch {
		case e.Kind == auth.EventPasswordSprayed:
			sprayedEvents++
			if e.Detail["accounts"] != fmt.Sprint(n) || e.Detail["until"] == "" || e.Account != "" {
				t.Errorf("password_sprayed event %+v; want %d accounts, until, and no account", e, n)
			}
			for k, v := range e.Detail {
				if v == sprayed || k == "password" {
					t.Errorf("password_sprayed event carries the password: %+v", e)
				}
			}
		case e.Kind == auth.EventLoginRejected:
			rejections++
			if e.Rule != auth.RuleLoginPassword {
				t.Errorf("rejection by %q; want %q", e.Rule, auth.RuleLoginPassword)
			}
		case e.Kind == auth.EventLockout:
			lockouts++
		}
	}
	if sprayedEvents != 1 || rejections != 3 || lockouts != 0 {
		t.Errorf("%d password_sprayed events, %d rejections, %d lockouts; want 1, 3, 0", sprayedEvents, rejections, lockouts)
	}
	warned := 0
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "password spraying") && strings.Contains(line, `"level":"WARN"`) {
			warned++
		}
		if strings.Contains(line, sprayed) || strings.Contains(line, decomposed) {
			t.Errorf("a log line holds the password: %s", line)
		}
	}
	if warned != 1 {
		t.Errorf("%d warnings of password spraying; want 1:\n%s", warned, logs.String())
	}
	active, err := s.Store.ActiveLockouts(t.Context(), time.Now(), 100)
	if err != nil || len(active) != 0 {
		t.Errorf("lockout log: %v, %v; want no account locked", active, err)
	}
}

// TestSprayingSettingsChecked: the service refuses spraying settings it
// cannot enforce, with a clear error.
func TestSprayingSettingsChecked(t *testing.T) {
	for _, tt := range []struct {
		accounts int
		window   time.Duration
	}{{0, time.Hour}, {33, time.Hour}, {10, 0}, {10, 32 * 24 * time.Hour}} {
		cfg := auth.DefaultConfig()
		cfg.Secret = []byte("0123456789abcdef0123456789abcdef")
		cfg.PublicURL, _ = url.Parse("https://login.example.test/")
		cfg.SprayAccounts, cfg.SprayWindow = tt.accounts, tt.window
		limiter, err := authtest.NewLimiter(auth.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		hasher, err := auth.NewHasher(authtest.FastParams, 1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = auth.NewService(cfg, auth.Deps{Store: authtest.NewStore(), Limiter: limiter, Hasher: hasher,
			Mailer: &authtest.Mailer{}, Events: &authtest.EventStore{}, Counter: &authtest.EventCounter{}})
		if err == nil {
			t.Errorf("spraying %d accounts per %s: accepted; want an error", tt.accounts, tt.window)
		}
	}
}

// sprayFailingLimiter fails every failure counted towards a password's
// spraying lock, as a Redis that errs on that one call would.
type sprayFailingLimiter struct{ auth.Limiter }

func (l sprayFailingLimiter) Fail(ctx context.Context, name, id, attempt string) (ratelimit.Failure, error) {
	if name == auth.RuleLoginPassword {
		return ratelimit.Failure{}, errors.New("spraying count failed")
	}
	return l.Limiter.Fail(ctx, name, id, attempt)
}

// TestSprayCountFailureKeepsLockout: a failure that cannot be counted
// towards the spraying lock is still counted towards the account's
// lockout, and still answered as a wrong password.
func TestSprayCountFailureKeepsLockout(t *testing.T) {
	s := authtest.NewService(t, nil, func(d *auth.Deps) { d.Limiter = sprayFailingLimiter{d.Limiter} })
	threshold := s.Config.Lockout.Threshold
	for i := range threshold {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: "victim@example.com",
			Password: fmt.Sprint("guess ", i), Client: client("192.0.2.1")})
		if !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("guess %d: %v; want a wrong password", i, err)
		}
	}
	_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: "victim@example.com",
		Password: "one more", Client: client("192.0.2.1")})
	if !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("after %d counted guesses: %v; want the account locked", threshold, err)
	}
}
