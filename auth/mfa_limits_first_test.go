package auth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestSecondStepLimitsBeforeLookup: a code sent with a second step's
// token past the limits is refused before the step or its account is
// looked up, so that tokens sent again and again, or made up, cost no
// query: a held answer's, which anyone gets without the password, and a
// stored step's. With Postgres gone, such a code is still refused by the
// limits rather than found unanswerable.
func TestSecondStepLimitsBeforeLookup(t *testing.T) {
	for _, tc := range []struct {
		name string
		step func(t *testing.T, f *fixture, c auth.Client) auth.SecondStepRequest
	}{
		{"held", func(t *testing.T, f *fixture, c auth.Client) auth.SecondStepRequest {
			f.addUser(t, "ann@example.com", "the real password", false)
			res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "not the password", Client: c})
			if !errors.Is(err, auth.ErrVerificationRequired) || res.MFA.Token == "" {
				t.Fatalf("held: %v %+v", err, res)
			}
			return auth.SecondStepRequest{Token: res.MFA.Token, Binding: res.MFA.Binding, Code: "123456", Client: c}
		}},
		{"made up", func(t *testing.T, f *fixture, c auth.Client) auth.SecondStepRequest {
			const token = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
			return auth.SecondStepRequest{Token: token, Binding: token, Code: "123456", Client: c}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *auth.Config) {
				c.NewDeviceVerification = auth.VerifyAlways
				c.Limits[auth.RuleMFANetwork] = ratelimit.Limit{Count: 3, Window: time.Minute}
			})
			c := client("192.0.2.7")
			step := tc.step(t, f, c)
			limited := false
			for range 5 {
				_, err := f.svc.SecondStep(t.Context(), step)
				var lim *auth.LimitedError
				if limited = errors.As(err, &lim); limited {
					break
				}
			}
			if !limited {
				t.Fatal("five codes from one network: never refused by the limits")
			}
			f.db.Close()
			_, err := f.svc.SecondStep(t.Context(), step)
			var lim *auth.LimitedError
			if !errors.As(err, &lim) {
				t.Errorf("a code past the limits with Postgres gone: %v, want a LimitedError before any query", err)
			}
		})
	}
}

// TestPasskeyStepOptionsLimitedBeforeLookup: the options of a second
// step's passkey are counted by passkey_options_ip, as a passwordless
// sign-in's are, before the step is looked up: made-up tokens past it
// cost no query.
func TestPasskeyStepOptionsLimitedBeforeLookup(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Limits[auth.RulePasskeyOptionsIP] = ratelimit.Limit{Count: 3, Window: time.Minute}
	})
	const token = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	c := client("192.0.2.8")
	for i := range 3 {
		if _, err := f.svc.BeginSecondStepPasskey(t.Context(), token, token, c); !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("made-up token %d: %v, want ErrInvalidToken", i, err)
		}
	}
	f.db.Close()
	var lim *auth.LimitedError
	if _, err := f.svc.BeginSecondStepPasskey(t.Context(), token, token, c); !errors.As(err, &lim) {
		t.Errorf("the fourth from one network, Postgres gone: %v, want a LimitedError before any query", err)
	}
}
