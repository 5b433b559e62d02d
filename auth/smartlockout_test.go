package auth_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// TestRetypedPasswordDoesNotLock: a user retyping the same wrong password
// (in any of its normalised forms) is never locked out by it, while as
// many distinct wrong passwords as the threshold lock, for an account and
// for a known device alike.
func TestRetypedPasswordDoesNotLock(t *testing.T) {
	s := authtest.NewService(t, func(c *auth.Config) {
		// Only the lockouts decide here, not the rules' counts.
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
		c.Limits.SetCount(auth.RuleLoginDevice, 1000)
		c.Limits.SetCount(auth.RuleLoginIP, 1000)
	})
	threshold := s.Config.Lockout.Threshold
	for _, email := range []string{"ann@example.com", "bob@example.com"} {
		if _, err := s.Service.CreateUser(t.Context(), email, "correct horse", false, "cli"); err != nil {
			t.Fatal(err)
		}
	}
	login := func(email, password, device string) (auth.LoginResult, error) {
		return s.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: password, Client: client("192.0.2.1"), DeviceCookie: device})
	}

	t.Run("account", func(t *testing.T) {
		// "café" composed and decomposed: one password once normalised.
		for i := range threshold + 5 {
			old := "old café"
			if i%2 == 1 {
				old = "old cafe\u0301"
			}
			if _, err := login("ann@example.com", old, ""); !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("retyping the old password, time %d of %d: %v; want wrong credentials, not locked", i+1, threshold+5, err)
			}
		}
		if _, err := login("ann@example.com", "correct horse", ""); err != nil {
			t.Fatalf("the right password after %d retypes of one wrong one: %v", threshold+5, err)
		}
		for i := range threshold {
			if _, err := login("bob@example.com", fmt.Sprint("guess ", i), ""); !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("distinct guess %d of %d: %v; want wrong credentials", i+1, threshold, err)
			}
		}
		if _, err := login("bob@example.com", "correct horse", ""); !errors.Is(err, auth.ErrLimited) {
			t.Fatalf("the right password after %d distinct guesses: %v; want locked out", threshold, err)
		}
	})

	t.Run("known device", func(t *testing.T) {
		first, err := login("ann@example.com", "correct horse", "")
		if err != nil {
			t.Fatal(err)
		}
		device := first.Device.Value
		for i := range threshold + 5 {
			if _, err := login("ann@example.com", "an old password", device); !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("retyping on a known device, time %d of %d: %v; want wrong credentials, not locked", i+1, threshold+5, err)
			}
		}
		if _, err := login("ann@example.com", "correct horse", device); err != nil {
			t.Fatalf("the right password on the device after %d retypes: %v", threshold+5, err)
		}
		for i := range threshold {
			if _, err := login("ann@example.com", fmt.Sprint("device guess ", i), device); !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("distinct guess %d of %d on the device: %v; want wrong credentials", i+1, threshold, err)
			}
		}
		if _, err := login("ann@example.com", "correct horse", device); !errors.Is(err, auth.ErrLimited) {
			t.Fatalf("the device after %d distinct guesses: %v; want locked out", threshold, err)
		}
	})
}
