package auth_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
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
