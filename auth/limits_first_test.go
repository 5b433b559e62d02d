package auth_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// TestLimitedSignInNeverHashes: a sign-in its limits or a lockout refuse
// is refused before its password is hashed, whatever it sends: an unknown
// account, a wrong password, the right one, the right one from a known
// device. A flood past its limits must cost no hash, or it would buy the
// hashing pool's time with requests it was refused.
func TestLimitedSignInNeverHashes(t *testing.T) {
	hasher, err := auth.NewHasher(authtest.FastParams, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := authtest.NewService(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 1) },
		func(d *auth.Deps) { d.Hasher = hasher })
	ctx := t.Context()
	_, ann := returningAnn(t, s.Service)
	hashes := auth.CountHashes(hasher)

	// A network whose one sign-in is spent, by a wrong password: hashed.
	spent := client("192.0.2.99")
	if _, err := s.Login(ctx, auth.LoginRequest{Email: "nobody@example.com", Password: "guess", Client: spent}); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("the network's one sign-in: %v, want ErrInvalidCredentials", err)
	}
	if n := hashes.Load(); n == 0 {
		t.Fatal("a sign-in admitted by its limits hashed nothing: the count counts nothing")
	}

	refused := func(what string, req auth.LoginRequest) {
		t.Helper()
		before := hashes.Load()
		if _, err := s.Login(ctx, req); !errors.Is(err, auth.ErrLimited) {
			t.Fatalf("%s: %v, want ErrLimited", what, err)
		}
		if n := hashes.Load() - before; n != 0 {
			t.Errorf("%s, refused by its limits: %d hashes, want none", what, n)
		}
	}
	refused("an unknown account", auth.LoginRequest{Email: "nobody@example.com", Password: "another guess", Client: spent})
	refused("a wrong password", auth.LoginRequest{Email: ann.Email, Password: "a wrong password", Client: spent})
	refused("the right password", auth.LoginRequest{Email: ann.Email, Password: ann.Password, Client: spent})
	fromDevice := ann
	fromDevice.Client = spent
	refused("the right password from a known device", fromDevice)

	// An account locked out: refused before the hash too, from a network
	// with its sign-in to spend.
	if _, err := s.CreateUser(ctx, "bob@example.com", "bob's password", false, "cli"); err != nil {
		t.Fatal(err)
	}
	for i := range s.Config.Lockout.Threshold {
		req := auth.LoginRequest{Email: "bob@example.com", Password: fmt.Sprint("guess ", i), Client: client(fmt.Sprintf("198.51.100.%d", 10+i))}
		if _, err := s.Login(ctx, req); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("failure %d: %v, want ErrInvalidCredentials", i+1, err)
		}
	}
	refused("the right password of a locked account", auth.LoginRequest{Email: "bob@example.com", Password: "bob's password", Client: client("203.0.113.1")})
}
