package auth_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// The network ladder: sign-ins and reset requests from many addresses of
// one IPv4 /24, IPv6 /56 or IPv6 /48 share that network's limit, each
// address well inside its own; a neighbouring network has its own. These
// run on authtest's in-memory service; the limits' exactness under
// concurrency is ratelimit's conformance suite.

func TestSignInLadder(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule string
		// same are addresses of one network of the rule, each in a
		// different network of the rung below; other is in the next one.
		same  []string
		other string
	}{
		{"IPv4 /24", auth.RuleLoginNetwork, []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.200"}, "192.0.3.1"},
		{"IPv6 /56", auth.RuleLoginNetwork, []string{"2001:db8:0:1::1", "2001:db8:0:2::1", "2001:db8:0:3::1", "2001:db8:0:ff::1"}, "2001:db8:0:100::1"},
		{"IPv6 /48", auth.RuleLoginSite, []string{"2001:db8:0:100::1", "2001:db8:0:200::1", "2001:db8:0:300::1", "2001:db8:0:ff00::1"}, "2001:db8:1::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := authtest.NewService(t, func(c *auth.Config) { c.Limits.SetCount(tc.rule, 3) })
			login := func(addr string) error {
				_, err := s.Service.Login(t.Context(), auth.LoginRequest{
					Email: "nobody@example.com", Password: "wrong password", Client: client(addr)})
				return err
			}
			for _, a := range tc.same[:3] {
				if err := login(a); !errors.Is(err, auth.ErrInvalidCredentials) {
					t.Fatalf("%s: %v; want a wrong password", a, err)
				}
			}
			if err := login(tc.same[3]); !errors.Is(err, auth.ErrLimited) {
				t.Fatalf("a fourth address of the network, %s: %v; want limited", tc.same[3], err)
			}
			if err := login(tc.other); !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("the next network, %s: %v; want a wrong password", tc.other, err)
			}
		})
	}
}

// TestSiteRuleLeavesIPv4Alone: the /48 rung has no IPv4 counterpart, so
// IPv4 clients, mapped ones included, and those an IPv6 address stands
// for (NAT64's well-known prefix), never count in it.
func TestSiteRuleLeavesIPv4Alone(t *testing.T) {
	s := authtest.NewService(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginSite, 1) })
	for i, a := range []string{"192.0.2.1", "198.51.100.1", "::ffff:203.0.113.1", "203.0.113.200",
		"64:ff9b::192.0.2.7", "64:ff9b::198.51.100.7"} {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{
			Email: fmt.Sprintf("nobody%d@example.com", i), Password: "wrong password", Client: client(a)})
		if !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("%s: %v; want a wrong password", a, err)
		}
	}
}

// ladderService is a service whose reset requests' /24 or /56 admits 2
// and /48 admits 3, as TestResetLadder and TestUnlockLadder climb them.
func ladderService(t *testing.T) *authtest.Service {
	return authtest.NewService(t, func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleResetNetwork, 2)
		c.Limits.SetCount(auth.RuleResetSite, 3)
	})
}

// climbLadder makes requests by request, for account i from addr, up
// ladderService's rungs: two from a /24, then limited, the next /24's
// own; three from three /56s of a /48, then limited. between runs after
// the /24's.
func climbLadder(t *testing.T, request func(addr string, i int) error, between func()) {
	t.Helper()
	for i, a := range []string{"192.0.2.1", "192.0.2.2"} {
		if err := request(a, i); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	if err := request("192.0.2.3", 2); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("a third address of the /24: %v; want limited", err)
	}
	if err := request("192.0.3.1", 3); err != nil {
		t.Fatalf("the next /24: %v", err)
	}
	between()
	for i, a := range []string{"2001:db8:0:100::1", "2001:db8:0:200::1", "2001:db8:0:300::1"} {
		if err := request(a, 10+i); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	if err := request("2001:db8:0:400::1", 20); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("a fourth /56 of the /48: %v; want limited", err)
	}
}

func TestResetLadder(t *testing.T) {
	s := ladderService(t)
	climbLadder(t, func(addr string, i int) error {
		return s.Service.RequestReset(t.Context(), fmt.Sprintf("user%d@example.com", i), client(addr))
	}, func() {})
}

// TestUnlockLadder: unlock-link requests climb the reset requests' ladder,
// under their limits (a count of their own): a /24, or a /48 of many /64s,
// cannot ask for more unlock links than reset links.
func TestUnlockLadder(t *testing.T) {
	s := ladderService(t)
	climbLadder(t, func(addr string, i int) error {
		return s.Service.RequestUnlock(t.Context(), fmt.Sprintf("user%d@example.com", i), client(addr))
	}, func() {
		// A reset request from the full /24 is counted apart.
		if err := s.Service.RequestReset(t.Context(), "user9@example.com", client("192.0.2.4")); err != nil {
			t.Fatalf("a reset request from the /24: %v", err)
		}
	})
}

// TestLinkConfirmLadder: reset, unlock and sign-in links opened or
// confirmed climb the reset requests' ladder too, each flow under those
// limits with a count of its own: each is a lookup of a token, so a /24,
// or a /48 of many /64s, cannot make more of them than it may ask for
// links (from each /64 alone, 65,536 times more).
func TestLinkConfirmLadder(t *testing.T) {
	// A made-up token is looked up and refused: ErrInvalidToken when the
	// limits admitted it.
	const token = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	looked := func(err error) error {
		if errors.Is(err, auth.ErrInvalidToken) {
			return nil
		}
		return err
	}
	for _, tc := range []struct {
		name    string
		confirm func(s *auth.Service, addr string) error
	}{
		{"reset link opened", func(s *auth.Service, addr string) error {
			return looked(s.CheckResetToken(t.Context(), token, client(addr)))
		}},
		{"new password set", func(s *auth.Service, addr string) error {
			return looked(s.ConfirmReset(t.Context(), token, "a new password 1", client(addr)))
		}},
		{"unlock link opened", func(s *auth.Service, addr string) error {
			return looked(s.CheckUnlockToken(t.Context(), token, client(addr)))
		}},
		{"unlock link confirmed", func(s *auth.Service, addr string) error {
			_, err := s.ConfirmUnlock(t.Context(), token, client(addr))
			return looked(err)
		}},
		{"sign-in link opened", func(s *auth.Service, addr string) error {
			_, err := s.CheckSignInToken(t.Context(), token, client(addr))
			return looked(err)
		}},
		{"sign-in link confirmed", func(s *auth.Service, addr string) error {
			_, err := s.ConfirmSignIn(t.Context(), token, client(addr), "")
			return looked(err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ladderService(t)
			climbLadder(t, func(addr string, _ int) error { return tc.confirm(s.Service, addr) }, func() {
				// Reset requests from the full /24 are counted apart.
				if err := s.Service.RequestReset(t.Context(), "user9@example.com", client("192.0.2.4")); err != nil {
					t.Fatalf("a reset request from the /24: %v", err)
				}
			})
		})
	}
}

// siteOf64s are addresses of four /64s of one IPv6 /48, and nextSite one
// of the next /48: a subscriber handed a /48 has 65,536 /64s to rotate
// through, each with a /64 rule's count of its own.
var (
	siteOf64s = []string{"2001:db8:0:100::1", "2001:db8:0:200::1", "2001:db8:0:300::1", "2001:db8:0:ff00::1"}
	nextSite  = "2001:db8:1::1"
)

// climbSite makes requests by request from siteOf64s, once each, under a
// /48 rung that admits 3: three are admitted (request returns nil), the
// fourth /64 is limited, and the next /48 is admitted again.
func climbSite(t *testing.T, request func(addr string) error) {
	t.Helper()
	for _, a := range siteOf64s[:3] {
		if err := request(a); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	if err := request(siteOf64s[3]); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("a fourth /64 of the /48, %s: %v; want limited", siteOf64s[3], err)
	}
	if err := request(nextSite); err != nil {
		t.Fatalf("the next /48, %s: %v", nextSite, err)
	}
}

// TestPasskeyOptionsLadder: passkey ceremonies begun, which anyone may ask
// for without a session and each of which stores a row, are counted per
// IPv6 /48 as well as per /64, so that a /48 cannot store 65,536 times
// the /64's count of them.
func TestPasskeyOptionsLadder(t *testing.T) {
	const token = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, tc := range []struct {
		name  string
		begin func(f *fixture, addr string) error
	}{
		{"passwordless sign-in", func(f *fixture, addr string) error {
			_, err := f.svc.BeginPasskeySignIn(t.Context(), client(addr))
			return err
		}},
		{"second step", func(f *fixture, addr string) error {
			// A made-up token is looked up and refused when the limits
			// admitted it.
			_, err := f.svc.BeginSecondStepPasskey(t.Context(), token, token, client(addr))
			if errors.Is(err, auth.ErrInvalidToken) {
				return nil
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *auth.Config) {
				c.Limits.SetCount(auth.RulePasskeyOptionsIP, 1)
				c.Limits.SetCount(auth.RulePasskeyOptionsSite, 3)
			})
			climbSite(t, func(addr string) error { return tc.begin(f, addr) })
			// IPv4 clients have no /48.
			for _, a := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"} {
				if err := tc.begin(f, a); err != nil {
					t.Fatalf("%s: %v", a, err)
				}
			}
		})
	}
}

// TestSecondStepLadder: codes and passkey assertions, each of which looks
// a token or a ceremony up (made-up ones included), are counted per IPv6
// /48 as well as per /64, as links opened are: a /48 makes no more
// lookups than the /48's count.
func TestSecondStepLadder(t *testing.T) {
	const token = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, tc := range []struct {
		name string
		try  func(f *fixture, addr string) error
	}{
		{"code", func(f *fixture, addr string) error {
			_, err := f.svc.SecondStep(t.Context(), auth.SecondStepRequest{Token: token, Binding: token, Code: "123456", Client: client(addr)})
			if errors.Is(err, auth.ErrInvalidToken) {
				return nil
			}
			return err
		}},
		{"passkey alone", func(f *fixture, addr string) error {
			_, err := f.svc.PasskeySignIn(t.Context(), auth.PasskeySignInRequest{Ceremony: token, Response: []byte(`{}`),
				Client: client(addr), Cookie: func(string) string { return "" }})
			if errors.Is(err, auth.ErrInvalidToken) {
				return nil
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *auth.Config) {
				c.Limits.SetCount(auth.RuleMFANetwork, 1)
				c.Limits.SetCount(auth.RuleMFASite, 3)
			})
			climbSite(t, func(addr string) error { return tc.try(f, addr) })
		})
	}
}
