package auth_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/crypto/argon2"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// TestRetypedPasswordDoesNotLock: a user retyping the same wrong password
// (in one form or another: each form counts once) is never locked out by
// it, while as many distinct wrong passwords as the threshold lock, for an
// account and for a known device alike.
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
		// "café" composed and decomposed: two forms, each counted once.
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

// TestRetypedFormsOfALegacyHashCount: a hash stored before passwords were
// normalised holds the password as typed, and a password NFKC changes is
// checked in both forms, so each way of typing it (a full-width letter
// here, not there) is a guess of its own against such an account. Each
// counts towards the lockout: were they one fingerprint, as forms of one
// password, an attacker could try every way of typing a guess refused
// once, never locked, and find the form the owner typed.
func TestRetypedFormsOfALegacyHashCount(t *testing.T) {
	const threshold = 3
	s := authtest.NewService(t, func(c *auth.Config) {
		c.Lockout.Threshold = threshold
		// Only the lockout decides here, not the rules' counts.
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
		c.Limits.SetCount(auth.RuleLoginIP, 1000)
	})
	const email, typed = "leg@example.com", "\uff53\uff45\uff43\uff52\uff45\uff54 horse"
	p := authtest.FastParams
	salt := make([]byte, p.SaltLen)
	rand.Read(salt)
	key := argon2.IDKey([]byte(typed), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	b64 := base64.RawStdEncoding
	legacy := fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
	if _, err := s.Store.CreateUser(t.Context(), email, legacy, false); err != nil {
		t.Fatal(err)
	}
	login := func(password string) error {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: password, Client: client("192.0.2.1")})
		return err
	}
	// The guess in plain letters, then with one full-width letter more
	// each time: one password once normalised, threshold guesses here.
	guesses := []string{"secret horse", "\uff53ecret horse", "\uff53\uff45cret horse"}
	for i, g := range guesses {
		if err := login(g); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("guess %d, %q: %v; want wrong credentials", i+1, g, err)
		}
	}
	if err := login(typed); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("the form the owner typed after %d other forms of it: %v; want locked out", threshold, err)
	}
}
