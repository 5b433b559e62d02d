package auth_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// TestDevicesBoundedUnderConcurrency: many browsers sign in at once; the
// account keeps exactly MaxDevices of them, and the last browser's cookie
// is among them.
func TestDevicesBoundedUnderConcurrency(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.MaxDevices = 3
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
		c.Limits.SetCount(auth.RuleLoginIP, 1000)
	})
	f.addUser(t, "ann@example.com", "the password", false)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 20 {
		wg.Go(func() {
			<-start
			if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "the password", Client: client(fmt.Sprintf("192.0.2.%d", i))}); err != nil {
				t.Errorf("sign-in %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := countRows(t, f, "SELECT count(*) FROM devices"); n != 3 {
		t.Fatalf("%d known devices after 20 concurrent sign-ins, want MaxDevices = 3", n)
	}
}

// TestNoDeviceForReplacedPassword: a sign-in that verified a password the
// account no longer has (a reset committed meanwhile) adds no device.
func TestNoDeviceForReplacedPassword(t *testing.T) {
	f := newFixture(t, nil)
	u := f.addUser(t, "ann@example.com", "the password", false)
	if err := f.svc.SetPassword(t.Context(), "ann@example.com", "another password", "cli"); err != nil {
		t.Fatal(err)
	}
	err := auth.AddDevice(f.svc, t.Context(), u, u.PasswordHash, "AAAAAAAAAAAAAAAAAAAAAA", false)
	if err == nil || errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("adding a device for the replaced password: %v, want a refusal", err)
	}
	if n := countRows(t, f, "SELECT count(*) FROM devices"); n != 0 {
		t.Fatalf("%d devices, want none", n)
	}
}

// TestDeviceExpires: a known device that has not signed in for DeviceTTL,
// however long its browser keeps the cookie, is held by the account's
// lockout like any browser.
func TestDeviceExpires(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 1000) })
	f.addUser(t, "ann@example.com", "the password", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "the password", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.cfg.Lockout.Threshold {
		if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: fmt.Sprint("guess ", i), Client: client("192.0.2.2")}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	device := auth.LoginRequest{Email: "ann@example.com", Password: "the password", Client: client("192.0.2.1"), DeviceCookie: res.Device.Value}
	if _, err := f.svc.Login(t.Context(), device); err != nil {
		t.Fatalf("known device during the lockout: %v", err)
	}
	// Past the device's lifetime (and the replica's memory of it).
	f.advance(f.cfg.DeviceTTL + time.Hour)
	if _, err := f.svc.Login(t.Context(), device); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("device unseen for longer than DeviceTTL during the lockout: %v, want ErrLimited", err)
	}
}

// TestForgottenCookiesSpendTheNetworksLimits: a device cookie keeps its
// MAC once its device is forgotten, so whoever signs in to an account of
// his own again and again holds as many as he likes. Sent one after
// another to that account once it is locked, each costs a lookup in
// Postgres that finds no device, and the lock refuses it before the
// network's rules count anything: each such lookup is counted by the
// network's rules, so that a client past them is refused before it
// costs another, and then costs none (the memory of rejections set long).
func TestForgottenCookiesSpendTheNetworksLimits(t *testing.T) {
	const perAddress = 5
	f := newFixture(t, func(c *auth.Config) {
		c.MaxDevices = 1
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
		c.Limits.SetCount(auth.RuleLoginIP, perAddress)
		c.RejectionMemory = time.Hour // outlasts the test: the lookups stop for good
	})
	ctx := t.Context()
	f.addUser(t, "mallory@example.com", "her own password", false)
	var cookies []string
	for i := range 3 * perAddress {
		res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "mallory@example.com", Password: "her own password",
			Client: client(fmt.Sprintf("198.51.100.%d", 10+i))})
		if err != nil {
			t.Fatal(err)
		}
		cookies = append(cookies, res.Device.Value)
	}
	forgotten := cookies[:2*perAddress] // MaxDevices keeps the last
	fresher := cookies[2*perAddress : len(cookies)-1]
	for i := range f.cfg.Lockout.Threshold {
		if _, err := f.svc.Login(ctx, auth.LoginRequest{Email: "mallory@example.com", Password: fmt.Sprint("guess ", i),
			Client: client(fmt.Sprintf("203.0.113.%d", 10+i))}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	for i, cookie := range forgotten {
		if _, err := f.svc.Login(ctx, auth.LoginRequest{Email: "mallory@example.com", Password: "her own password",
			Client: client("192.0.2.77"), DeviceCookie: cookie}); !errors.Is(err, auth.ErrLimited) {
			t.Fatalf("forgotten cookie %d on the locked account: %v, want ErrLimited", i, err)
		}
	}
	// The address has spent its limit on them: another account's sign-in
	// from it is refused too.
	f.addUser(t, "ann@example.com", "the password", false)
	if _, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "the password",
		Client: client("192.0.2.77")}); !errors.Is(err, auth.ErrLimited) {
		t.Errorf("a sign-in from the address after %d forgotten cookies looked up: %v, want ErrLimited by its limit of %d",
			len(forgotten), err, perAddress)
	}
	// And from then on they cost no lookup: with the devices table
	// locked, none waits on it.
	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `LOCK TABLE devices IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for _, cookie := range fresher {
			_, err := f.svc.Login(ctx, auth.LoginRequest{Email: "mallory@example.com", Password: "her own password",
				Client: client("192.0.2.77"), DeviceCookie: cookie})
			if !errors.Is(err, auth.ErrLimited) {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("a forgotten cookie once the address is over its limit: %v, want ErrLimited", err)
			}
			return
		default:
		}
		var waiting int
		if err := f.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM devices d JOIN users%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			tx.Rollback(ctx)
			t.Fatalf("a forgotten cookie once the address is over its limit was looked up (answered %v once the table was free)", <-done)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestForgottenCookieWaitingForAPlaceCountsOnce: a sign-in with a
// forgotten device's cookie that its limits admit, and so count, but that
// then waits in vain for its place towards the lockout (the guesses in
// flight hold every place, and lock the account) is refused having been
// counted once by its network's rules, as any admitted sign-in is: its
// lookup is not counted again as a refused one's is.
func TestForgottenCookieWaitingForAPlaceCountsOnce(t *testing.T) {
	const perAddress = 5
	gather := newGatheringStore(100) // never reached: released when quiet
	s := authtest.NewService(t, func(c *auth.Config) {
		c.MaxDevices = 1
		c.Lockout.Threshold = 3
		c.Limits.SetCount(auth.RuleLoginAccount, 100)
		c.Limits.SetCount(auth.RuleLoginIP, perAddress)
	}, func(d *auth.Deps) {
		gather.Store = d.Store
		d.Store = gather
	})
	ctx := t.Context()
	const email = "mallory@example.com"
	for _, u := range []string{email, "ann@example.com"} {
		if _, err := s.Service.CreateUser(ctx, u, "her own password", false, "cli"); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.Service.Login(ctx, auth.LoginRequest{Email: email, Password: "her own password", Client: client("198.51.100.1")})
	if err != nil {
		t.Fatal(err)
	}
	// MaxDevices keeps the second: the first's cookie is a forgotten one.
	if _, err := s.Service.Login(ctx, auth.LoginRequest{Email: email, Password: "her own password", Client: client("198.51.100.2")}); err != nil {
		t.Fatal(err)
	}

	// The threshold's guesses hold every place of the account, held before
	// their hashes until the store has heard nothing for a while.
	gather.gather(2 * time.Second)
	threshold := s.Config.Lockout.Threshold
	var wg sync.WaitGroup
	for i := range threshold {
		wg.Go(func() {
			_, err := s.Service.Login(ctx, auth.LoginRequest{Email: email, Password: fmt.Sprint("guess ", i),
				Client: client(fmt.Sprintf("203.0.113.%d", 10+i))})
			if !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Errorf("guess %d: %v", i, err)
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); gather.held() < threshold; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d guesses in flight, want %d", gather.held(), threshold)
		}
	}
	const x = "192.0.2.77"
	_, err = s.Service.Login(ctx, auth.LoginRequest{Email: email, Password: "her own password", Client: client(x),
		DeviceCookie: first.Device.Value})
	if !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("a forgotten cookie while the guesses hold every place: %v, want ErrLimited", err)
	}
	wg.Wait()

	// Counted once: the address has perAddress-1 sign-ins left, not one
	// fewer.
	for i := range perAddress - 1 {
		if _, err := s.Service.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "her own password",
			Client: client(x)}); err != nil {
			t.Fatalf("sign-in %d from the address after the refused one: %v; its lookup was counted twice", i+2, err)
		}
	}
	if _, err := s.Service.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "her own password",
		Client: client(x)}); !errors.Is(err, auth.ErrLimited) {
		t.Errorf("sign-in %d from the address: %v, want ErrLimited by its limit of %d", perAddress+1, err, perAddress)
	}
}
