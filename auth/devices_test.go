package auth_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestDevicesBoundedUnderConcurrency: many browsers sign in at once; the
// account keeps exactly MaxDevices of them, and the last browser's cookie
// is among them.
func TestDevicesBoundedUnderConcurrency(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.MaxDevices = 3
		c.Limits.LoginAccount.Count = 1000
		c.Limits.LoginIP.Count = 1000
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
	if err := f.svc.SetPassword(t.Context(), "ann@example.com", "another password"); err != nil {
		t.Fatal(err)
	}
	err := auth.AddDevice(f.svc, t.Context(), u.ID, u.PasswordHash, "AAAAAAAAAAAAAAAAAAAAAA")
	if err == nil || errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("adding a device for the replaced password: %v, want a refusal", err)
	}
	if n := countRows(t, f, "SELECT count(*) FROM devices"); n != 0 {
		t.Fatalf("%d devices, want none", n)
	}
}
