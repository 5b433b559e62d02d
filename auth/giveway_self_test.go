package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// signInAlone runs req alone on s and reports whether any hash of hasher
// gave way to a returning browser meanwhile. Nothing else is in flight,
// so any that did waited for this very sign-in: up to hashGiveWay, only
// because its own device cookie is valid.
func signInAlone(t *testing.T, s *auth.Service, hasher *auth.Hasher, req auth.LoginRequest) (waited bool, err error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := s.Login(t.Context(), req); done <- err }()
	for {
		select {
		case err := <-done:
			return waited, err
		default:
		}
		if auth.GivingWayToReturning(hasher) > 0 {
			waited = true
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestReturningSignInDoesNotWaitForItself: a sign-in with a device cookie
// this server signed never gives way to itself. Its hashes that are not
// VerifyTrusted's (its device was forgotten, or its password is rehashed)
// would otherwise wait out hashGiveWay for its own mark: a returning user
// slower than any other, and a sign-in whose time tells whether the
// cookie it sent is valid.
func TestReturningSignInDoesNotWaitForItself(t *testing.T) {
	setup := func(t *testing.T) (*auth.Service, *authtest.Store, *auth.Hasher, auth.User, auth.LoginRequest) {
		hasher, _ := giveWayHasher(t)
		store := authtest.NewStore()
		s := authtest.NewService(t, nil, withStore(store), func(d *auth.Deps) { d.Hasher = hasher })
		user, ann := returningAnn(t, s.Service)
		return s.Service, store, hasher, user, ann
	}

	t.Run("device forgotten", func(t *testing.T) {
		s, store, hasher, user, ann := setup(t)
		devices, err := store.AccountDevices(t.Context(), user.ID, 10)
		if err != nil || len(devices) != 1 {
			t.Fatalf("devices: %v, %v", devices, err)
		}
		forgetDevice(t, store, user, devices[0].PublicID)
		for _, pw := range []string{"wrong", "correct horse"} {
			ann.Password = pw
			waited, err := signInAlone(t, s, hasher, ann)
			if waited {
				t.Errorf("password %q, forgotten device: its hash gave way to its own sign-in (%v)", pw, err)
			}
		}
	})

	t.Run("rehash", func(t *testing.T) {
		s, store, hasher, user, ann := setup(t)
		// A hash made with other parameters: the right password is
		// rehashed once verified.
		old, err := auth.NewHasher(auth.Params{Memory: 128, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, 1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		outdated, err := old.Hash(context.Background(), "correct horse")
		if err != nil {
			t.Fatal(err)
		}
		current, err := store.UserByEmail(t.Context(), user.Email)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.RehashPassword(t.Context(), user.ID, current.PasswordHash, outdated); err != nil {
			t.Fatal(err)
		}
		waited, err := signInAlone(t, s, hasher, ann)
		if err != nil {
			t.Fatalf("returning sign-in: %v", err)
		}
		if waited {
			t.Error("the returning browser's rehash gave way to its own sign-in")
		}
		if after, _ := store.UserByEmail(t.Context(), user.Email); after.PasswordHash == outdated {
			t.Error("the password was not rehashed")
		}
	})
}
