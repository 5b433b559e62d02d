package auth_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/app"
)

// TestUnknownAccountCostsTheSame compares the time of a sign-in for an
// unknown account with a wrong password for a real one, with the default
// (production) hashing parameters. Both must cost one hash; the medians of
// interleaved tries must agree within noise. The bound is loose on purpose:
// it catches a path that skips the hash (a whole hash apart, ~25 ms or
// more), not scheduler jitter.
func TestUnknownAccountCostsTheSame(t *testing.T) {
	hasher, err := auth.NewHasher(auth.DefaultParams, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleLoginAccount, 1000)
		c.Limits.SetCount(auth.RuleLoginIP, 1000)
		c.Lockout.Threshold = 1000
	}, func(d *app.Deps) { d.Hasher = hasher })
	f.addUser(t, "real@example.com", "the real password", false)

	const tries = 31
	var known, unknown []time.Duration
	for range tries {
		for _, email := range []string{"real@example.com", "ghost@example.com"} {
			start := time.Now()
			_, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: email, Password: "wrong password", Client: client("192.0.2.1")})
			d := time.Since(start)
			if !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("%s: %v, want ErrInvalidCredentials", email, err)
			}
			if email == "real@example.com" {
				known = append(known, d)
			} else {
				unknown = append(unknown, d)
			}
		}
	}
	mk, mu := median(known), median(unknown)
	t.Logf("median wrong password %v, unknown account %v", mk, mu)
	diff := mk - mu
	if diff < 0 {
		diff = -diff
	}
	// A skipped hash would put the medians an order of magnitude apart;
	// half the larger median leaves room for a busy machine.
	if limit := max(mk, mu) / 2; diff > limit {
		t.Errorf("medians differ by %v (known %v, unknown %v), more than %v", diff, mk, mu, limit)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
