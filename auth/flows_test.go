package auth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// The tests in this file run the flows on authtest's in-memory service
// (stores, limits, events and mail), with no database, Redis or mail
// server: they test the flows' logic, whatever keeps the records. What the
// records cost in PostgreSQL and Redis (transactions, locks, races) is
// tested with the real stores, in this package's other tests and in
// packages postgres and ratelimit.

// newMemoryFixture is a fixture on authtest.NewService.
func newMemoryFixture(t *testing.T, deps ...func(*auth.Deps)) *fixture {
	t.Helper()
	s := authtest.NewService(t, nil, deps...)
	return &fixture{svc: s.Service, cfg: s.Config, mailBody: func(t *testing.T, to string) string { return s.Mail.WaitFor(t, to).Body }}
}

// hookedStore is an in-memory store that runs a hook before some writes,
// to put the flows at the moment a concurrent request would change the
// account.
type hookedStore struct {
	*authtest.Store
	beforeRehash, beforeAddDevice, beforeCreateSession func()
}

func (s *hookedStore) RehashPassword(ctx context.Context, userID int64, old, hash string) error {
	run(s.beforeRehash)
	return s.Store.RehashPassword(ctx, userID, old, hash)
}

func (s *hookedStore) AddDevice(ctx context.Context, userID int64, passwordHash string, signOuts int64, nonceHash []byte, at time.Time, max int, verified bool) error {
	run(s.beforeAddDevice)
	return s.Store.AddDevice(ctx, userID, passwordHash, signOuts, nonceHash, at, max, verified)
}

func (s *hookedStore) CreateSession(ctx context.Context, tokenHash []byte, sess auth.Session, passwordHash string, signOuts int64) error {
	run(s.beforeCreateSession)
	return s.Store.CreateSession(ctx, tokenHash, sess, passwordHash, signOuts)
}

func run(hook func()) {
	if hook != nil {
		hook()
	}
}

func withStore(s auth.Store) func(*auth.Deps) {
	return func(d *auth.Deps) { d.Store = s }
}

// TestResetTokenWorksOnceOnMemoryStore: a reset link sets a password once;
// it ends the account's sessions and forgets its devices.
func TestResetTokenWorksOnceOnMemoryStore(t *testing.T) {
	store := authtest.NewStore()
	f := newMemoryFixture(t, withStore(store))
	u := f.addUser(t, "ann@example.com", "old password", false)
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "old password", Client: client("192.0.2.1")}); err != nil {
		t.Fatal(err)
	}
	if s, d := store.Sessions(u.ID), store.Devices(u.ID); s != 1 || d != 1 {
		t.Fatalf("after a sign-in: %d sessions, %d devices; want 1 and 1", s, d)
	}
	token := requestResetToken(t, f, "ann@example.com")
	if err := f.svc.ConfirmReset(t.Context(), token, "new password 1", client("192.0.2.1")); err != nil {
		t.Fatalf("ConfirmReset: %v", err)
	}
	if s, d := store.Sessions(u.ID), store.Devices(u.ID); s != 0 || d != 0 {
		t.Errorf("after the reset: %d sessions, %d devices; want none", s, d)
	}
	if err := f.svc.ConfirmReset(t.Context(), token, "new password 2", client("192.0.2.1")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("the token a second time: %v, want ErrInvalidToken", err)
	}
	if err := f.svc.CheckResetToken(t.Context(), token, client("198.51.100.21")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("CheckResetToken after use: %v, want ErrInvalidToken", err)
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "new password 1", Client: client("192.0.2.1")}); err != nil {
		t.Errorf("the password the token set: %v", err)
	}
}

// TestSignInRefusedWhenPasswordReplacedMeanwhile: a password replaced
// after a sign-in verified the old one, at each write the sign-in makes
// afterwards, refuses that sign-in as wrong credentials and leaves it no
// session; the in-memory store puts the replacement exactly there, which
// a race against the database hits only by chance.
func TestSignInRefusedWhenPasswordReplacedMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		known bool // sign in from a known device
		hook  func(s *hookedStore, replace func())
	}{
		{"before adding the device", false, func(s *hookedStore, replace func()) { s.beforeAddDevice = replace }},
		{"before the session", false, func(s *hookedStore, replace func()) { s.beforeCreateSession = replace }},
		{"before a known device's session", true, func(s *hookedStore, replace func()) { s.beforeCreateSession = replace }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &hookedStore{Store: authtest.NewStore()}
			f := newMemoryFixture(t, withStore(store))
			u := f.addUser(t, "ann@example.com", "old password", false)
			req := auth.LoginRequest{Email: "ann@example.com", Password: "old password", Client: client("192.0.2.1")}
			if tc.known {
				first, err := f.svc.Login(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				req.DeviceCookie = first.Device.Value
				if err := f.svc.Logout(t.Context(), first.Session.Token); err != nil {
					t.Fatal(err)
				}
			}
			tc.hook(store, func() {
				if _, err := store.SetPassword(context.Background(), "ann@example.com", "the hash of a new password"); err != nil {
					t.Error(err)
				}
			})
			if _, err := f.svc.Login(t.Context(), req); !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("sign-in with the replaced password: %v, want ErrInvalidCredentials", err)
			}
			if n := store.Sessions(u.ID); n != 0 {
				t.Errorf("%d sessions after the refused sign-in, want none", n)
			}
		})
	}
}

// TestRehashRefusedWhenPasswordReplacedMeanwhile: a sign-in that would
// store a new hash of the password it verified, after that password was
// replaced, is refused and the replacement stays.
func TestRehashRefusedWhenPasswordReplacedMeanwhile(t *testing.T) {
	store := &hookedStore{Store: authtest.NewStore()}
	hasher, err := auth.NewHasher(auth.Params{Memory: 128, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := newMemoryFixture(t, withStore(store), func(d *auth.Deps) { d.Hasher = hasher })
	old, err := auth.NewHasher(fastParams, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	oldHash, err := old.Hash(t.Context(), "old password")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateUser(t.Context(), "ann@example.com", oldHash, false); err != nil {
		t.Fatal(err)
	}
	newHash, err := old.Hash(t.Context(), "a new password")
	if err != nil {
		t.Fatal(err)
	}
	rehashed := false
	store.beforeRehash = func() {
		rehashed = true
		if _, err := store.SetPassword(context.Background(), "ann@example.com", newHash); err != nil {
			t.Error(err)
		}
	}
	if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "old password", Client: client("192.0.2.1")}); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("sign-in whose rehash finds the password replaced: %v, want ErrInvalidCredentials", err)
	}
	if !rehashed {
		t.Fatal("the sign-in did not rehash; the test proves nothing")
	}
	if u, err := store.UserByEmail(t.Context(), "ann@example.com"); err != nil || u.PasswordHash != newHash {
		t.Errorf("stored hash %q (%v), want the replacement's", u.PasswordHash, err)
	}
}

// TestSignOutEverywhereOnMemoryStore: signing an account out everywhere
// ends its sessions and forgets its devices, and an unknown account is
// ErrNoUser.
func TestSignOutEverywhereOnMemoryStore(t *testing.T) {
	store := authtest.NewStore()
	f := newMemoryFixture(t, withStore(store))
	u := f.addUser(t, "ann@example.com", "the password", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "the password", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.SignOutEverywhere(t.Context(), "Ann@Example.com", "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Session(t.Context(), res.Session.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("session after signing out everywhere: %v, want ErrNoSession", err)
	}
	if d := store.Devices(u.ID); d != 0 {
		t.Errorf("%d devices after signing out everywhere, want none", d)
	}
	if err := f.svc.SignOutEverywhere(t.Context(), "nobody@example.com", "cli"); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("an unknown account: %v, want ErrNoUser", err)
	}
}
