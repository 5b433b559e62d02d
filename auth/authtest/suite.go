package authtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestStore checks that a store keeps the promises of auth's storage
// interfaces, concurrency included. newStore returns an empty store of its
// own for each case. Every implementation runs it: the in-memory Store, so
// that the flows' tests on it mean what they say, and package postgres.
//
// Stores use their own clock only where the interfaces take no time
// (CreateUser, RehashPassword), so the cases work with any clock.
func TestStore(t *testing.T, newStore func(t *testing.T) auth.Store) {
	for _, tc := range slices.Concat(storeCases, sessionListCases) {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

// base is the time the cases write, in whole seconds, which every store
// keeps exactly.
var base = time.Now().Truncate(time.Second)

func hash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func mustUser(t *testing.T, s auth.Store, email string) auth.User {
	t.Helper()
	u, err := s.CreateUser(t.Context(), email, "hash of "+email, false)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func newSession(t *testing.T, s auth.Store, u auth.User, token string) {
	t.Helper()
	sess := auth.Session{UserID: u.ID, CreatedAt: base, ExpiresAt: base.Add(time.Hour)}
	if err := s.CreateSession(t.Context(), hash(token), sess, u.PasswordHash, u.SignOuts); err != nil {
		t.Fatal(err)
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var storeCases = []struct {
	name string
	run  func(t *testing.T, s auth.Store)
}{
	{"an email is taken once", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		if _, err := s.CreateUser(t.Context(), "ann@example.com", "x", true); !errors.Is(err, auth.ErrUserExists) {
			t.Errorf("second account with the email: %v, want ErrUserExists", err)
		}
		got, err := s.UserByEmail(t.Context(), "ann@example.com")
		if err != nil || got.ID != u.ID || got.PasswordHash != u.PasswordHash || got.IsAdmin {
			t.Errorf("UserByEmail = %+v, %v; want %+v", got, err, u)
		}
		if _, err := s.UserByEmail(t.Context(), "bob@example.com"); !errors.Is(err, auth.ErrNoUser) {
			t.Errorf("unknown email: %v, want ErrNoUser", err)
		}
	}},
	{"accounts created at once all get distinct ids, and one email wins once", func(t *testing.T, s auth.Store) {
		var won atomic.Int32
		var wg sync.WaitGroup
		ids := make([]int64, 20)
		for i := range 20 {
			wg.Go(func() {
				if u, err := s.CreateUser(context.Background(), fmt.Sprintf("u%d@example.com", i), "h", false); err == nil {
					ids[i] = u.ID
				} else {
					t.Error(err)
				}
				if _, err := s.CreateUser(context.Background(), "same@example.com", "h", false); err == nil {
					won.Add(1)
				} else if !errors.Is(err, auth.ErrUserExists) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		seen := map[int64]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Errorf("id %d given twice", id)
			}
			seen[id] = true
		}
		if won.Load() != 1 {
			t.Errorf("%d accounts created for one email, want 1", won.Load())
		}
	}},
	{"a rehash needs the old hash", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		if err := s.RehashPassword(t.Context(), u.ID, "not the hash", "new"); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Fatalf("rehash of a replaced hash: %v, want ErrPasswordChanged", err)
		}
		mustNil(t, s.RehashPassword(t.Context(), u.ID, u.PasswordHash, "new"))
		if got, _ := s.UserByEmail(t.Context(), u.Email); got.PasswordHash != "new" {
			t.Errorf("hash %q after the rehash, want new", got.PasswordHash)
		}
	}},
	{"a sign-out everywhere refuses the session and device of a sign-in that read the account before it", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		_, err := s.SignOutEverywhere(t.Context(), u.Email)
		mustNil(t, err)
		sess := auth.Session{UserID: u.ID, CreatedAt: base, ExpiresAt: base.Add(time.Hour)}
		if err := s.CreateSession(t.Context(), hash("a"), sess, u.PasswordHash, u.SignOuts); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Errorf("session of a sign-in under way: %v, want ErrPasswordChanged", err)
		}
		if err := s.AddDevice(t.Context(), u.ID, u.PasswordHash, u.SignOuts, hash("d"), base, 10, false); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Errorf("device of a sign-in under way: %v, want ErrPasswordChanged", err)
		}
		// The owner's "sign out other browsers" too.
		again, err := s.UserByEmail(t.Context(), u.Email)
		mustNil(t, err)
		if again.SignOuts == u.SignOuts {
			t.Fatalf("SignOuts %d after a sign-out everywhere, as before it", again.SignOuts)
		}
		mustNil(t, s.CreateSession(t.Context(), hash("mine"), sess, again.PasswordHash, again.SignOuts))
		_, err = s.EndOtherSessions(t.Context(), u.ID, hash("mine"))
		mustNil(t, err)
		if err := s.CreateSession(t.Context(), hash("b"), sess, again.PasswordHash, again.SignOuts); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Errorf("session of a sign-in under way when the other browsers were signed out: %v, want ErrPasswordChanged", err)
		}
		// A sign-in that reads the account afterwards signs in.
		now, err := s.UserByEmail(t.Context(), u.Email)
		mustNil(t, err)
		mustNil(t, s.CreateSession(t.Context(), hash("c"), sess, now.PasswordHash, now.SignOuts))
		mustNil(t, s.AddDevice(t.Context(), u.ID, now.PasswordHash, now.SignOuts, hash("d"), base, 10, false))
	}},
	{"a session needs the verified hash, expires and ends", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		sess := auth.Session{UserID: u.ID, CreatedAt: base, ExpiresAt: base.Add(time.Hour)}
		if err := s.CreateSession(t.Context(), hash("a"), sess, "replaced", 0); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Fatalf("session for a replaced hash: %v, want ErrPasswordChanged", err)
		}
		if _, err := s.SessionByHash(t.Context(), hash("a"), base); !errors.Is(err, auth.ErrNoSession) {
			t.Fatalf("the refused session: %v, want ErrNoSession", err)
		}
		newSession(t, s, u, "b")
		got, err := s.SessionByHash(t.Context(), hash("b"), base.Add(time.Minute))
		if err != nil || got.UserID != u.ID || got.Email != u.Email || !got.ExpiresAt.Equal(sess.ExpiresAt) || !got.CreatedAt.Equal(base) {
			t.Fatalf("SessionByHash = %+v, %v", got, err)
		}
		if _, err := s.SessionByHash(t.Context(), hash("b"), base.Add(time.Hour)); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("session at its expiry: %v, want ErrNoSession", err)
		}
		mustNil(t, s.DeleteSession(t.Context(), hash("b")))
		mustNil(t, s.DeleteSession(t.Context(), hash("never")))
		if _, err := s.SessionByHash(t.Context(), hash("b"), base); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("deleted session: %v, want ErrNoSession", err)
		}
	}},
	{"a new password ends sessions, devices and open unlock links, of that account only", func(t *testing.T, s auth.Store) {
		ann, bob := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com")
		for _, u := range []auth.User{ann, bob} {
			newSession(t, s, u, "session "+u.Email)
			mustNil(t, s.AddDevice(t.Context(), u.ID, u.PasswordHash, u.SignOuts, hash("device "+u.Email), base, 10, false))
			mustNil(t, s.AddUnlockToken(t.Context(), hash("unlock "+u.Email), u.ID, base, base.Add(time.Hour)))
		}
		if id, err := s.SetPassword(t.Context(), "ann@example.com", "new"); err != nil || id != ann.ID {
			t.Errorf("SetPassword: %d, %v; want %d", id, err, ann.ID)
		}
		if _, err := s.SetPassword(t.Context(), "nobody@example.com", "new"); !errors.Is(err, auth.ErrNoUser) {
			t.Errorf("unknown account: %v, want ErrNoUser", err)
		}
		checkSignedOut(t, s, ann, true)
		checkSignedOut(t, s, bob, false)
		if got, _ := s.UserByEmail(t.Context(), ann.Email); got.PasswordHash != "new" {
			t.Errorf("hash %q, want new", got.PasswordHash)
		}
	}},
	{"a session keeps whether it must change the password", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		for token, must := range map[string]bool{"restricted": true, "free": false} {
			sess := auth.Session{UserID: u.ID, CreatedAt: base, ExpiresAt: base.Add(time.Hour), MustChangePassword: must}
			mustNil(t, s.CreateSession(t.Context(), hash(token), sess, u.PasswordHash, u.SignOuts))
			if got, err := s.SessionByHash(t.Context(), hash(token), base); err != nil || got.MustChangePassword != must {
				t.Errorf("session %s: MustChangePassword = %v, %v; want %v", token, got.MustChangePassword, err, must)
			}
		}
	}},
	{"a password change keeps its own session, under a new token, and device, lifts the restriction, and ends the rest of that account only", func(t *testing.T, s auth.Store) {
		ann, bob := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com")
		for _, u := range []auth.User{ann, bob} {
			newSession(t, s, u, "session "+u.Email)
			mustNil(t, s.AddDevice(t.Context(), u.ID, u.PasswordHash, u.SignOuts, hash("device "+u.Email), base, 10, false))
			mustNil(t, s.AddUnlockToken(t.Context(), hash("unlock "+u.Email), u.ID, base, base.Add(time.Hour)))
		}
		mine := auth.Session{UserID: ann.ID, CreatedAt: base, ExpiresAt: base.Add(time.Hour), MustChangePassword: true}
		mustNil(t, s.CreateSession(t.Context(), hash("mine"), mine, ann.PasswordHash, ann.SignOuts))
		mustNil(t, s.AddDevice(t.Context(), ann.ID, ann.PasswordHash, ann.SignOuts, hash("my device"), base, 10, false))

		if err := s.ChangePassword(t.Context(), ann.ID, "not the hash", "new", hash("mine"), hash("mine rotated"), hash("my device")); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Fatalf("change from a replaced hash: %v, want ErrPasswordChanged", err)
		}
		if err := s.ChangePassword(t.Context(), ann.ID, ann.PasswordHash, "new", hash("session "+bob.Email), hash("bob's rotated"), nil); !errors.Is(err, auth.ErrNoSession) {
			t.Fatalf("change from another account's session: %v, want ErrNoSession", err)
		}
		if got, _ := s.UserByEmail(t.Context(), ann.Email); got.PasswordHash != ann.PasswordHash {
			t.Fatalf("a refused change stored hash %q", got.PasswordHash)
		}
		if _, err := s.SessionByHash(t.Context(), hash("session "+bob.Email), base); err != nil {
			t.Errorf("bob's session after a change refused for it: %v", err)
		}
		mustNil(t, s.ChangePassword(t.Context(), ann.ID, ann.PasswordHash, "new", hash("mine"), hash("mine rotated"), hash("my device")))
		if got, _ := s.UserByEmail(t.Context(), ann.Email); got.PasswordHash != "new" {
			t.Errorf("hash %q, want new", got.PasswordHash)
		}
		if got, err := s.SessionByHash(t.Context(), hash("mine"), base); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("the changing session under its old token: %+v, %v; want ErrNoSession", got, err)
		}
		got, err := s.SessionByHash(t.Context(), hash("mine rotated"), base)
		if err != nil || got.MustChangePassword || got.UserID != ann.ID || !got.ExpiresAt.Equal(mine.ExpiresAt) {
			t.Errorf("the changing session under its new token: %+v, %v; want it kept, unrestricted, expiring as before", got, err)
		}
		if known, _ := s.KnownDevice(t.Context(), ann.Email, hash("my device"), base.Add(-time.Second)); !known {
			t.Error("the changing browser's device was forgotten")
		}
		checkSignedOut(t, s, ann, true)
		checkSignedOut(t, s, bob, false)

		// Without a device to keep, every one goes.
		ann, _ = s.UserByEmail(t.Context(), ann.Email)
		mustNil(t, s.ChangePassword(t.Context(), ann.ID, ann.PasswordHash, "newer", hash("mine rotated"), hash("mine again"), nil))
		if known, _ := s.KnownDevice(t.Context(), ann.Email, hash("my device"), base.Add(-time.Second)); known {
			t.Error("a device kept by a change that kept none")
		}
	}},
	{"signing out everywhere ends sessions, devices and open unlock links, of that account only", func(t *testing.T, s auth.Store) {
		ann, bob := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com")
		for _, u := range []auth.User{ann, bob} {
			newSession(t, s, u, "session "+u.Email)
			mustNil(t, s.AddDevice(t.Context(), u.ID, u.PasswordHash, u.SignOuts, hash("device "+u.Email), base, 10, false))
			mustNil(t, s.AddUnlockToken(t.Context(), hash("unlock "+u.Email), u.ID, base, base.Add(time.Hour)))
		}
		id, err := s.SignOutEverywhere(t.Context(), "ann@example.com")
		if err != nil || id != ann.ID {
			t.Fatalf("SignOutEverywhere = %d, %v; want %d", id, err, ann.ID)
		}
		if _, err := s.SignOutEverywhere(t.Context(), "nobody@example.com"); !errors.Is(err, auth.ErrNoUser) {
			t.Errorf("unknown account: %v, want ErrNoUser", err)
		}
		checkSignedOut(t, s, ann, true)
		checkSignedOut(t, s, bob, false)
	}},
	{"forgetting new devices ends their accounts' new sessions, and nothing older or elsewhere", func(t *testing.T, s auth.Store) {
		since := base.Add(time.Minute)
		ann, bob, cy := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com"), mustUser(t, s, "cy@example.com")
		session := func(u auth.User, token string, at time.Time) {
			t.Helper()
			sess := auth.Session{UserID: u.ID, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
			mustNil(t, s.CreateSession(t.Context(), hash(token), sess, u.PasswordHash, u.SignOuts))
		}
		// Ann: a laptop known from before, with its session, and a new
		// browser signed in since. Bob: only old ones. Cy: a new session
		// from a known device, no new device.
		mustNil(t, s.AddDevice(t.Context(), ann.ID, "", 0, hash("ann old"), base, 10, false))
		session(ann, "ann old", base)
		mustNil(t, s.AddDevice(t.Context(), ann.ID, "", 0, hash("ann new"), since, 10, false))
		session(ann, "ann new", since.Add(time.Second))
		mustNil(t, s.AddDevice(t.Context(), bob.ID, "", 0, hash("bob old"), base, 10, false))
		session(bob, "bob old", base)
		mustNil(t, s.AddDevice(t.Context(), cy.ID, "", 0, hash("cy old"), base, 10, false))
		session(cy, "cy new", since.Add(time.Second))

		got, err := s.ForgetNewDevices(t.Context(), since, nil)
		if err != nil || len(got) != 1 || got[0].ID != ann.ID || got[0].Email != ann.Email {
			t.Fatalf("ForgetNewDevices = %+v, %v; want ann only", got, err)
		}
		for _, c := range []struct {
			email, nonce string
			want         bool
		}{{ann.Email, "ann old", true}, {ann.Email, "ann new", false}, {bob.Email, "bob old", true}, {cy.Email, "cy old", true}} {
			if known, _ := s.KnownDevice(t.Context(), c.email, hash(c.nonce), base.Add(-time.Second)); known != c.want {
				t.Errorf("device %s known = %v, want %v", c.nonce, known, c.want)
			}
		}
		for token, live := range map[string]bool{"ann old": true, "ann new": false, "bob old": true, "cy new": true} {
			_, err := s.SessionByHash(t.Context(), hash(token), since.Add(2*time.Second))
			if gone := errors.Is(err, auth.ErrNoSession); gone == live {
				t.Errorf("session %q gone = %v, want %v (%v)", token, gone, !live, err)
			}
		}
		// A second pass finds no device, and ends the sessions the
		// accounts it is given started since: ann's, from a browser whose
		// device was forgotten but known a moment longer elsewhere.
		session(ann, "ann later", since.Add(2*time.Second))
		if again, err := s.ForgetNewDevices(t.Context(), since, []int64{ann.ID}); err != nil || len(again) != 0 {
			t.Errorf("a second ForgetNewDevices = %+v, %v; want nothing", again, err)
		}
		if _, err := s.SessionByHash(t.Context(), hash("ann later"), since.Add(3*time.Second)); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("the second pass left ann's later session: %v", err)
		}
		if _, err := s.SessionByHash(t.Context(), hash("bob old"), since.Add(3*time.Second)); err != nil {
			t.Errorf("the second pass ended bob's old session: %v", err)
		}
	}},
	{"forgetting new devices keeps the verified ones: by a second factor, a sign-in link or an unlock link", func(t *testing.T, s auth.Store) {
		since := base.Add(time.Minute)
		ann, bob, cy := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com"), mustUser(t, s, "cy@example.com")
		mustNil(t, s.AddDevice(t.Context(), ann.ID, ann.PasswordHash, ann.SignOuts, hash("ann factor"), since, 10, true))
		mustNil(t, s.AddSignInToken(t.Context(), hash("bob link"), bob.ID, bob.PasswordHash, bob.SignOuts, base, since.Add(time.Hour)))
		if _, err := s.UseSignInToken(t.Context(), hash("bob link"), since, hash("bob link device"), 10); err != nil {
			t.Fatal(err)
		}
		mustNil(t, s.AddUnlockToken(t.Context(), hash("cy unlock"), cy.ID, base, since.Add(time.Hour)))
		if _, _, err := s.UseUnlockToken(t.Context(), hash("cy unlock"), since, hash("cy unlock device"), 10); err != nil {
			t.Fatal(err)
		}
		mustNil(t, s.AddDevice(t.Context(), cy.ID, cy.PasswordHash, cy.SignOuts, hash("cy password"), since, 10, false))
		got, err := s.ForgetNewDevices(t.Context(), since, nil)
		if err != nil || len(got) != 1 || got[0].ID != cy.ID {
			t.Fatalf("ForgetNewDevices = %+v, %v; want cy only, for the device her password alone added", got, err)
		}
		for _, c := range []struct {
			email, nonce string
			want         bool
		}{{ann.Email, "ann factor", true}, {bob.Email, "bob link device", true}, {cy.Email, "cy unlock device", true}, {cy.Email, "cy password", false}} {
			if known, _ := s.KnownDevice(t.Context(), c.email, hash(c.nonce), base); known != c.want {
				t.Errorf("device %s known = %v, want %v", c.nonce, known, c.want)
			}
		}
	}},
	{"a device needs the verified hash, is known to its account only, and ages", func(t *testing.T, s auth.Store) {
		ann, bob := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com")
		if err := s.AddDevice(t.Context(), ann.ID, "replaced", 0, hash("d1"), base, 10, false); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Fatalf("device for a replaced hash: %v, want ErrPasswordChanged", err)
		}
		if err := s.AddDevice(t.Context(), ann.ID+bob.ID+1, "", 0, hash("d1"), base, 10, false); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Fatalf("device of a missing account: %v, want ErrPasswordChanged", err)
		}
		mustNil(t, s.AddDevice(t.Context(), ann.ID, "", 0, hash("d2"), base, 10, false))
		for _, c := range []struct {
			email     string
			nonce     string
			seenAfter time.Time
			want      bool
		}{
			{"ann@example.com", "d2", base.Add(-time.Second), true},
			{"bob@example.com", "d2", base.Add(-time.Second), false},
			{"ann@example.com", "d1", base.Add(-time.Second), false},
			{"ann@example.com", "d2", base, false},
		} {
			if got, err := s.KnownDevice(t.Context(), c.email, hash(c.nonce), c.seenAfter); err != nil || got != c.want {
				t.Errorf("KnownDevice(%s, %s, seen after %s) = %v, %v; want %v", c.email, c.nonce, c.seenAfter.Sub(base), got, err, c.want)
			}
		}
		mustNil(t, s.TouchDevice(t.Context(), hash("d2"), base.Add(time.Hour)))
		if got, _ := s.KnownDevice(t.Context(), ann.Email, hash("d2"), base.Add(time.Minute)); !got {
			t.Error("a device touched later is not known after its first sign-in")
		}
	}},
	{"an account keeps its max most recently used devices", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		for i := range 4 {
			mustNil(t, s.AddDevice(t.Context(), u.ID, u.PasswordHash, u.SignOuts, hash(fmt.Sprint("d", i)), base.Add(time.Duration(i)*time.Minute), 3, false))
		}
		// d1 signs in again: d2 is base the least recently used.
		mustNil(t, s.TouchDevice(t.Context(), hash("d1"), base.Add(time.Hour)))
		mustNil(t, s.AddDevice(t.Context(), u.ID, u.PasswordHash, u.SignOuts, hash("d4"), base.Add(10*time.Minute), 3, false))
		for i, want := range []bool{false, true, false, true, true} {
			if got, _ := s.KnownDevice(t.Context(), u.Email, hash(fmt.Sprint("d", i)), base.Add(-time.Hour)); got != want {
				t.Errorf("device d%d known = %v, want %v", i, got, want)
			}
		}
	}},
	{"devices added at once keep the bound", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if err := s.AddDevice(context.Background(), u.ID, u.PasswordHash, u.SignOuts, hash(fmt.Sprint("d", i)), base, 3, false); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		known := 0
		for i := range 20 {
			if ok, _ := s.KnownDevice(t.Context(), u.Email, hash(fmt.Sprint("d", i)), base.Add(-time.Hour)); ok {
				known++
			}
		}
		if known != 3 {
			t.Errorf("%d devices known after 20 added at once, want max = 3", known)
		}
	}},
	{"a reset token works once, spends the account's others and replaces the password", func(t *testing.T, s auth.Store) {
		ann, bob := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com")
		newSession(t, s, ann, "session "+ann.Email)
		mustNil(t, s.AddDevice(t.Context(), ann.ID, "", 0, hash("device "+ann.Email), base, 10, false))
		mustNil(t, s.AddResetToken(t.Context(), hash("t1"), ann.ID, base, base.Add(time.Hour), false))
		mustNil(t, s.AddResetToken(t.Context(), hash("t2"), ann.ID, base, base.Add(time.Hour), false))
		mustNil(t, s.AddResetToken(t.Context(), hash("b1"), bob.ID, base, base.Add(time.Hour), false))
		if id, email, err := s.ResetTokenUser(t.Context(), hash("t1"), base); err != nil || id != ann.ID || email != ann.Email {
			t.Fatalf("ResetTokenUser = %d, %q, %v", id, email, err)
		}
		if _, _, err := s.ResetTokenUser(t.Context(), hash("t1"), base.Add(time.Hour)); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("token at its expiry: %v, want ErrInvalidToken", err)
		}
		if _, _, err := s.ResetPassword(t.Context(), hash("t1"), base.Add(time.Hour), "new"); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("spending a token at its expiry: %v, want ErrInvalidToken", err)
		}
		id, email, err := s.ResetPassword(t.Context(), hash("t1"), base, "new")
		if err != nil || id != ann.ID || email != ann.Email {
			t.Fatalf("ResetPassword = %d, %q, %v", id, email, err)
		}
		for _, tok := range []string{"t1", "t2"} {
			if _, _, err := s.ResetPassword(t.Context(), hash(tok), base, "newer"); !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("token %s after a reset: %v, want ErrInvalidToken", tok, err)
			}
		}
		if _, _, err := s.ResetTokenUser(t.Context(), hash("b1"), base); err != nil {
			t.Errorf("another account's token after a reset: %v", err)
		}
		if got, _ := s.UserByEmail(t.Context(), ann.Email); got.PasswordHash != "new" {
			t.Errorf("hash %q, want new", got.PasswordHash)
		}
		checkSignedOut(t, s, ann, true)
	}},
	{"a password change spends the reset links but a change notice's; an operator's new password spends them all", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		newSession(t, s, u, "session "+u.Email)
		mustNil(t, s.AddResetToken(t.Context(), hash("link"), u.ID, base, base.Add(time.Hour), false))
		mustNil(t, s.AddResetToken(t.Context(), hash("change notice"), u.ID, base, base.Add(time.Hour), true))
		mustNil(t, s.ChangePassword(t.Context(), u.ID, u.PasswordHash, "changed", hash("session "+u.Email), hash("rotated "+u.Email), nil))
		if _, _, err := s.ResetTokenUser(t.Context(), hash("link"), base); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("a reset link after a password change: %v, want ErrInvalidToken", err)
		}
		if _, _, err := s.ResetTokenUser(t.Context(), hash("change notice"), base); err != nil {
			t.Errorf("a change notice's link after a later change: %v, want usable", err)
		}
		if _, err := s.SetPassword(t.Context(), u.Email, "set"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.ResetTokenUser(t.Context(), hash("change notice"), base); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("a change notice's link after an operator set the password: %v, want ErrInvalidToken", err)
		}
	}},
	{"a link is stored only for an account that exists", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		gone := u.ID + 1000
		if err := s.AddResetToken(t.Context(), hash("r"), gone, base, base.Add(time.Hour), false); !errors.Is(err, auth.ErrNoUser) {
			t.Errorf("reset link of no account: %v, want ErrNoUser", err)
		}
		if err := s.AddUnlockToken(t.Context(), hash("u"), gone, base, base.Add(time.Hour)); !errors.Is(err, auth.ErrNoUser) {
			t.Errorf("unlock link of no account: %v, want ErrNoUser", err)
		}
		if err := s.AddSignInToken(t.Context(), hash("i"), gone, u.PasswordHash, u.SignOuts, base, base.Add(time.Hour)); !errors.Is(err, auth.ErrNoUser) {
			t.Errorf("sign-in link of no account: %v, want ErrNoUser", err)
		}
		mustNil(t, s.AddResetToken(t.Context(), hash("r"), u.ID, base, base.Add(time.Hour), false))
		mustNil(t, s.AddUnlockToken(t.Context(), hash("u"), u.ID, base, base.Add(time.Hour)))
	}},
	{"a reset token spent at once works once", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		mustNil(t, s.AddResetToken(t.Context(), hash("t"), u.ID, base, base.Add(time.Hour), false))
		var spent atomic.Int32
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				_, _, err := s.ResetPassword(context.Background(), hash("t"), base, fmt.Sprint("hash ", i))
				switch {
				case err == nil:
					spent.Add(1)
				case !errors.Is(err, auth.ErrInvalidToken):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if spent.Load() != 1 {
			t.Errorf("the token set a password %d times, want once", spent.Load())
		}
	}},
	{"an unlock token works once and adds a device", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		mustNil(t, s.AddUnlockToken(t.Context(), hash("t"), u.ID, base, base.Add(time.Hour)))
		if ok, err := s.UnlockTokenLive(t.Context(), hash("t"), base); err != nil || !ok {
			t.Fatalf("UnlockTokenLive = %v, %v", ok, err)
		}
		if ok, _ := s.UnlockTokenLive(t.Context(), hash("t"), base.Add(time.Hour)); ok {
			t.Error("a token at its expiry is live")
		}
		spendAtOnce(t, s, u, func(nonceHash []byte) (auth.User, error) {
			id, email, err := s.UseUnlockToken(context.Background(), hash("t"), base, nonceHash, 10)
			return auth.User{ID: id, Email: email, PasswordHash: u.PasswordHash}, err
		})
		if ok, _ := s.UnlockTokenLive(t.Context(), hash("t"), base); ok {
			t.Error("a spent token is live")
		}
	}},
	{"a sign-in token works once, signs in its account and adds a device", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		mustUser(t, s, "bob@example.com")
		mustNil(t, s.AddSignInToken(t.Context(), hash("t"), u.ID, u.PasswordHash, u.SignOuts, base, base.Add(time.Hour)))
		if email, err := s.SignInTokenLive(t.Context(), hash("t"), base); err != nil || email == "" {
			t.Fatalf("SignInTokenLive = %q, %v", email, err)
		}
		if email, _ := s.SignInTokenLive(t.Context(), hash("t"), base.Add(time.Hour)); email != "" {
			t.Error("a token at its expiry is live")
		}
		if _, err := s.UseSignInToken(t.Context(), hash("t"), base.Add(time.Hour), hash("late"), 10); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("UseSignInToken at its expiry: %v, want ErrInvalidToken", err)
		}
		if _, err := s.UseSignInToken(t.Context(), hash("unknown"), base, hash("x"), 10); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("UseSignInToken of an unknown token: %v, want ErrInvalidToken", err)
		}
		spendAtOnce(t, s, u, func(nonceHash []byte) (auth.User, error) {
			return s.UseSignInToken(context.Background(), hash("t"), base, nonceHash, 10)
		})
		if email, _ := s.SignInTokenLive(t.Context(), hash("t"), base); email != "" {
			t.Error("a spent token is live")
		}
	}},
	{"a sign-in token dies with the password it was made with", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		mustNil(t, s.AddSignInToken(t.Context(), hash("t"), u.ID, u.PasswordHash, u.SignOuts, base, base.Add(time.Hour)))
		// One for a hash that is not the account's is refused.
		if err := s.AddSignInToken(t.Context(), hash("stale"), u.ID, "an older hash", u.SignOuts, base, base.Add(time.Hour)); !errors.Is(err, auth.ErrPasswordChanged) {
			t.Errorf("a token for an older hash: %v, want ErrPasswordChanged", err)
		}
		if email, _ := s.SignInTokenLive(t.Context(), hash("stale"), base); email != "" {
			t.Error("a token made with another password is live")
		}
		if _, err := s.UseSignInToken(t.Context(), hash("stale"), base, hash("d0"), 10); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("UseSignInToken made with another password: %v, want ErrInvalidToken", err)
		}
		_, err := s.SetPassword(t.Context(), u.Email, "new")
		mustNil(t, err)
		if email, _ := s.SignInTokenLive(t.Context(), hash("t"), base); email != "" {
			t.Error("a token is live after the password changed")
		}
		if _, err := s.UseSignInToken(t.Context(), hash("t"), base, hash("d1"), 10); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("UseSignInToken after the password changed: %v, want ErrInvalidToken", err)
		}
		if ok, _ := s.KnownDevice(t.Context(), u.Email, hash("d1"), base.Add(-time.Second)); ok {
			t.Error("a refused token added a device")
		}
	}},
	{"the lockout log lists the latest lockout in force of each account, newest first", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		for _, l := range []auth.Lockout{
			{Account: "ann@example.com", UserID: u.ID, Level: 1, Failures: 10, LockedAt: base, LockedUntil: base.Add(time.Hour)},
			{Account: "ann@example.com", UserID: u.ID, Level: 2, Failures: 20, LockedAt: base.Add(2 * time.Minute), LockedUntil: base.Add(2 * time.Hour)},
			{Account: "nobody@example.com", Level: 1, Failures: 10, LockedAt: base.Add(time.Minute), LockedUntil: base.Add(time.Hour)},
			{Account: "old@example.com", Level: 1, Failures: 10, LockedAt: base.Add(-time.Hour), LockedUntil: base},
		} {
			mustNil(t, s.RecordLockout(t.Context(), l))
		}
		got, err := s.ActiveLockouts(t.Context(), base, 10)
		if err != nil || len(got) != 2 || got[0].Account != "ann@example.com" || got[0].Level != 2 || got[0].Failures != 20 ||
			got[0].UserID != u.ID || !got[0].LockedUntil.Equal(base.Add(2*time.Hour)) || got[1].Account != "nobody@example.com" || got[1].UserID != 0 {
			t.Fatalf("ActiveLockouts = %+v, %v", got, err)
		}
		if got, _ := s.ActiveLockouts(t.Context(), base, 1); len(got) != 1 {
			t.Errorf("ActiveLockouts with limit 1: %d rows", len(got))
		}
		for account, want := range map[string]bool{"ann@example.com": true, "old@example.com": false, "bob@example.com": false} {
			if listed, err := s.LockoutListed(t.Context(), account, base); err != nil || listed != want {
				t.Errorf("LockoutListed(%s) = %v, %v; want %v", account, listed, err, want)
			}
		}
		mustNil(t, s.ClearLockout(t.Context(), "ann@example.com", base, "cli"))
		if listed, _ := s.LockoutListed(t.Context(), "ann@example.com", base); listed {
			t.Error("a cleared lockout is listed")
		}
		if got, _ := s.ActiveLockouts(t.Context(), base, 10); len(got) != 1 || got[0].Account != "nobody@example.com" {
			t.Errorf("ActiveLockouts after clearing ann = %+v", got)
		}
	}},
	{"the second step's locks are listed apart from the password's, and not held", func(t *testing.T, s auth.Store) {
		second := auth.SecondStepLockPrefix + "ann@example.com"
		for _, l := range []auth.Lockout{
			// Both of ann's steps locked at one instant.
			{Account: "ann@example.com", Level: 1, Failures: 10, LockedAt: base, LockedUntil: base.Add(time.Hour)},
			{Account: second, Level: 1, Failures: 5, LockedAt: base, LockedUntil: base.Add(2 * time.Hour)},
			{Account: auth.SecondStepLockPrefix + "bob@example.com", Level: 1, Failures: 5, LockedAt: base, LockedUntil: base.Add(time.Hour)},
		} {
			mustNil(t, s.RecordLockout(t.Context(), l))
		}
		got, err := s.ActiveLockouts(t.Context(), base, 10)
		var keys []string
		for _, l := range got {
			keys = append(keys, l.Account)
		}
		// Equal times: the newer row first.
		if want := []string{auth.SecondStepLockPrefix + "bob@example.com", second, "ann@example.com"}; err != nil || !slices.Equal(keys, want) {
			t.Errorf("ActiveLockouts = %q, %v; want %q", keys, err, want)
		}
		held, err := s.LockoutsToHold(t.Context(), base, 10)
		if err != nil || len(held) != 1 || held[0].Account != "ann@example.com" {
			t.Errorf("LockoutsToHold = %+v, %v; want ann's password lockout alone", held, err)
		}
		// Clearing the password's lockout leaves the second step's.
		mustNil(t, s.ClearLockout(t.Context(), "ann@example.com", base, "reset"))
		if listed, _ := s.LockoutListed(t.Context(), second, base); !listed {
			t.Error("clearing ann's password lockout cleared her second step's lock")
		}
	}},
	{"the lockouts to hold are XCloak's own first, then applications', each newest first", func(t *testing.T, s auth.Store) {
		for i, account := range []string{
			"app shop a", "app shop b", "ann@example.com", "app blog x", "bob@example.com", "app blog y",
		} {
			mustNil(t, s.RecordLockout(t.Context(), auth.Lockout{Account: account, Level: 1, Failures: 10,
				LockedAt: base.Add(time.Duration(i) * time.Minute), LockedUntil: base.Add(time.Hour)}))
		}
		// Equal times: the newer row first.
		for _, account := range []string{"cat@example.com", "dan@example.com"} {
			mustNil(t, s.RecordLockout(t.Context(), auth.Lockout{Account: account, Level: 1, Failures: 10,
				LockedAt: base.Add(-time.Minute), LockedUntil: base.Add(time.Hour)}))
		}
		mustNil(t, s.RecordLockout(t.Context(), auth.Lockout{Account: "old@example.com", Level: 1, Failures: 10,
			LockedAt: base.Add(-time.Hour), LockedUntil: base}))
		got, err := s.LockoutsToHold(t.Context(), base, 6)
		if err != nil {
			t.Fatal(err)
		}
		var accounts []string
		for _, l := range got {
			accounts = append(accounts, l.Account)
		}
		want := []string{"bob@example.com", "ann@example.com", "dan@example.com", "cat@example.com", "app blog y", "app blog x"}
		if !slices.Equal(accounts, want) {
			t.Errorf("LockoutsToHold = %q, want %q", accounts, want)
		}
	}},
	{"the lockouts to hold are accounts' that exist before addresses' that do not", func(t *testing.T, s auth.Store) {
		// Anyone can lock a made-up address (a threshold of guesses), as
		// many as he likes: held first, their newer locks would push an
		// older lock of a real account off the list.
		eve := mustUser(t, s, "eve@example.com")
		mustNil(t, s.RecordLockout(t.Context(), auth.Lockout{Account: "eve@example.com", UserID: eve.ID, Level: 1, Failures: 10,
			LockedAt: base.Add(-time.Hour), LockedUntil: base.Add(time.Hour)}))
		for i := range 3 {
			mustNil(t, s.RecordLockout(t.Context(), auth.Lockout{Account: fmt.Sprintf("made-up%d@example.com", i), Level: 1, Failures: 10,
				LockedAt: base.Add(time.Duration(i) * time.Minute), LockedUntil: base.Add(time.Hour)}))
		}
		got, err := s.LockoutsToHold(t.Context(), base, 2)
		if err != nil {
			t.Fatal(err)
		}
		var accounts []string
		for _, l := range got {
			accounts = append(accounts, l.Account)
		}
		if want := []string{"eve@example.com", "made-up2@example.com"}; !slices.Equal(accounts, want) {
			t.Errorf("LockoutsToHold = %q, want %q", accounts, want)
		}
	}},
	{"a lockout whose time ran out is ended once, and one cleared early never", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		for _, l := range []auth.Lockout{
			{Account: "ann@example.com", UserID: u.ID, Level: 1, Failures: 10, LockedAt: base.Add(-time.Hour), LockedUntil: base},
			{Account: "bob@example.com", Level: 1, Failures: 10, LockedAt: base.Add(-time.Hour), LockedUntil: base.Add(-time.Minute)},
			{Account: "cleared@example.com", Level: 1, Failures: 10, LockedAt: base.Add(-time.Hour), LockedUntil: base.Add(time.Minute)},
			{Account: "later@example.com", Level: 1, Failures: 10, LockedAt: base, LockedUntil: base.Add(time.Second)},
		} {
			mustNil(t, s.RecordLockout(t.Context(), l))
		}
		mustNil(t, s.ClearLockout(t.Context(), "cleared@example.com", base, "cli"))
		first, err := s.EndLockouts(t.Context(), base.Add(time.Minute), 1)
		if err != nil || len(first) != 1 || first[0].Account != "bob@example.com" {
			t.Fatalf("EndLockouts with limit 1 = %+v, %v; want bob's, the first to end", first, err)
		}
		rest, err := s.EndLockouts(t.Context(), base.Add(time.Minute), 10)
		if err != nil || len(rest) != 2 {
			t.Fatalf("EndLockouts = %+v, %v; want ann's and later's", rest, err)
		}
		got := map[string]auth.Lockout{}
		for _, l := range rest {
			got[l.Account] = l
		}
		if a := got["ann@example.com"]; a.UserID != u.ID || a.Level != 1 || !a.LockedUntil.Equal(base) {
			t.Errorf("ann's ended lockout = %+v", a)
		}
		if _, ok := got["later@example.com"]; !ok {
			t.Errorf("EndLockouts = %+v, missing later's", rest)
		}
		if again, err := s.EndLockouts(t.Context(), base.Add(time.Hour), 10); err != nil || len(again) != 0 {
			t.Errorf("EndLockouts a second time = %+v, %v; want none", again, err)
		}
	}},
	{"sweeping removes only what is older than the cutoff", func(t *testing.T, s auth.Store) {
		u := mustUser(t, s, "ann@example.com")
		old, cutoff := base.Add(-2*time.Hour), base.Add(-time.Hour)
		mustNil(t, s.CreateSession(t.Context(), hash("s old"), auth.Session{UserID: u.ID, CreatedAt: old, ExpiresAt: old}, u.PasswordHash, u.SignOuts))
		newSession(t, s, u, "s new")
		mustNil(t, s.AddResetToken(t.Context(), hash("r old"), u.ID, old, old, false))
		mustNil(t, s.AddResetToken(t.Context(), hash("r new"), u.ID, base, base.Add(time.Hour), false))
		mustNil(t, s.AddUnlockToken(t.Context(), hash("u old"), u.ID, old, old))
		mustNil(t, s.AddUnlockToken(t.Context(), hash("u new"), u.ID, base, base.Add(time.Hour)))
		mustNil(t, s.AddSignInToken(t.Context(), hash("i old"), u.ID, u.PasswordHash, u.SignOuts, old, old))
		mustNil(t, s.AddSignInToken(t.Context(), hash("i new"), u.ID, u.PasswordHash, u.SignOuts, base, base.Add(time.Hour)))
		mustNil(t, s.AddDevice(t.Context(), u.ID, "", 0, hash("d old"), old, 10, false))
		mustNil(t, s.AddDevice(t.Context(), u.ID, "", 0, hash("d new"), base, 10, false))
		for _, kind := range []auth.SweepKind{auth.SweepSessions, auth.SweepResetTokens, auth.SweepUnlockTokens, auth.SweepSignInTokens, auth.SweepDevices} {
			if n, err := s.Sweep(t.Context(), kind, cutoff); err != nil || n != 1 {
				t.Errorf("Sweep(%s) = %d, %v; want 1", kind, n, err)
			}
		}
		if _, err := s.SessionByHash(t.Context(), hash("s new"), base); err != nil {
			t.Errorf("live session swept: %v", err)
		}
		if _, _, err := s.ResetTokenUser(t.Context(), hash("r new"), base); err != nil {
			t.Errorf("live reset token swept: %v", err)
		}
		if ok, _ := s.UnlockTokenLive(t.Context(), hash("u new"), base); !ok {
			t.Error("live unlock token swept")
		}
		if email, _ := s.SignInTokenLive(t.Context(), hash("i new"), base); email == "" {
			t.Error("live sign-in token swept")
		}
		if ok, _ := s.KnownDevice(t.Context(), u.Email, hash("d new"), cutoff); !ok {
			t.Error("recent device swept")
		}
		if _, err := s.Sweep(t.Context(), "no such kind", base); err == nil {
			t.Error("Sweep of an unknown kind: no error")
		}
	}},
}

// checkSignedOut checks whether u's session, device and unlock link, made
// by the cases above under names derived from its email, are gone (want)
// or still there.
// spendAtOnce has ten goroutines spend one token at once, each for a
// device of its own, and checks that it was spent once, for u, and added
// one device to u.
func spendAtOnce(t *testing.T, s auth.Store, u auth.User, use func(nonceHash []byte) (auth.User, error)) {
	t.Helper()
	var spent atomic.Int32
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			got, err := use(hash(fmt.Sprint("d", i)))
			switch {
			case err == nil && (got.ID != u.ID || got.Email != u.Email || got.PasswordHash != u.PasswordHash):
				t.Errorf("spending the token signed in %+v, want %+v", got, u)
			case err == nil:
				spent.Add(1)
			case !errors.Is(err, auth.ErrInvalidToken):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	known := 0
	for i := range 10 {
		if ok, _ := s.KnownDevice(t.Context(), u.Email, hash(fmt.Sprint("d", i)), base.Add(-time.Second)); ok {
			known++
		}
	}
	if spent.Load() != 1 || known != 1 {
		t.Errorf("the token was spent %d times and added %d devices; want once and one", spent.Load(), known)
	}
}

func checkSignedOut(t *testing.T, s auth.Store, u auth.User, want bool) {
	t.Helper()
	_, err := s.SessionByHash(t.Context(), hash("session "+u.Email), base)
	device, _ := s.KnownDevice(t.Context(), u.Email, hash("device "+u.Email), base.Add(-time.Second))
	unlock, _ := s.UnlockTokenLive(t.Context(), hash("unlock "+u.Email), base)
	if gone := errors.Is(err, auth.ErrNoSession); gone != want {
		t.Errorf("%s: session gone = %v, want %v", u.Email, gone, want)
	}
	if device == want {
		t.Errorf("%s: device known = %v, want %v", u.Email, device, !want)
	}
	if unlock && want {
		t.Errorf("%s: unlock link live, want it gone", u.Email)
	}
}
