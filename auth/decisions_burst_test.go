package auth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/app"
)

// TestAppBurstNeverPassesTheLockout: an application's sign-in attempts
// each hold a place towards the lockout of their account, or of their
// known device, from the decision to the outcome, as XCloak's own
// password checks do: one failure short of the lock, of attempts asked
// at once only one goes ahead, and its failure locks. Without the
// places, every one that the rate limits admit would go ahead, each
// password checked by the application past the lock.
func TestAppBurstNeverPassesTheLockout(t *testing.T) {
	const burst = 12
	for _, tc := range []struct {
		name   string
		device string
	}{{"account", ""}, {"known device", "laptop-1"}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *auth.Config) {
				c.Lockout.Threshold = 3
				c.Limits.SetCount(auth.RuleLoginAccount, 100)
				c.Limits.SetCount(auth.RuleLoginDevice, 100)
				c.Limits.SetCount(auth.RuleLoginIP, 100)
			})
			ctx := t.Context()
			_, app, err := f.svc.AddAPIKey(ctx, "shop", "cli")
			if err != nil {
				t.Fatal(err)
			}
			decide := func(i int) (auth.AttemptDecision, error) {
				return f.svc.Decide(ctx, app, auth.AttemptRequest{Kind: auth.AttemptLogin, Account: "fay",
					Device: tc.device, ClientIP: fmt.Sprintf("198.51.100.%d", i%200+1)})
			}
			report := func(d auth.AttemptDecision, result string) {
				t.Helper()
				if err := f.svc.AttemptOutcome(ctx, app, d.AttemptID, result); err != nil {
					t.Fatalf("reporting %s: %v", result, err)
				}
			}
			if tc.device != "" {
				// The device signs in once and is known from then on.
				d, err := decide(0)
				if err != nil {
					t.Fatal(err)
				}
				report(d, auth.ResultSuccess)
			}
			for i := range 2 {
				d, err := decide(i)
				if err != nil {
					t.Fatalf("failure %d: %v", i+1, err)
				}
				report(d, auth.ResultFailure)
			}

			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				allowed []auth.AttemptDecision
				denied  []error
			)
			for i := range burst {
				wg.Go(func() {
					d, err := decide(10 + i)
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						allowed = append(allowed, d)
					} else {
						denied = append(denied, err)
					}
				})
			}
			wg.Wait()
			if len(allowed) != 1 {
				t.Fatalf("%d attempts asked at once one failure short of the lock: %d went ahead, want 1", burst, len(allowed))
			}
			for _, err := range denied {
				var de *auth.DeniedError
				if !errors.As(err, &de) || de.RetryAfter <= 0 {
					t.Fatalf("an attempt past the places: %v, want a DeniedError with a retry-after", err)
				}
			}
			report(allowed[0], auth.ResultFailure)
			var de *auth.DeniedError
			if _, err := decide(99); !errors.As(err, &de) || !de.Locked {
				t.Errorf("after the third failure: %v, want the lock's DeniedError", err)
			}
		})
	}
}

// TestAppOutcomeGivesThePlaceBack: an attempt's place is given back with
// its outcome, so that an application that reports them is held by its
// places only while its own checks are under way.
func TestAppOutcomeGivesThePlaceBack(t *testing.T) {
	f := newFixture(t, func(c *auth.Config) {
		c.Lockout.Threshold = 2
		c.Limits.SetCount(auth.RuleLoginAccount, 100)
		c.Limits.SetCount(auth.RuleLoginIP, 100)
	})
	ctx := t.Context()
	_, app, err := f.svc.AddAPIKey(ctx, "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	decide := func() (auth.AttemptDecision, error) {
		return f.svc.Decide(ctx, app, auth.AttemptRequest{Kind: auth.AttemptLogin, Account: "gus", ClientIP: "198.51.100.7"})
	}
	first, err := decide()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.AttemptOutcome(ctx, app, first.AttemptID, auth.ResultFailure); err != nil {
		t.Fatal(err)
	}
	second, err := decide()
	if err != nil {
		t.Fatalf("one failure and nothing in flight: %v, want the attempt to go ahead", err)
	}
	var de *auth.DeniedError
	if _, err := decide(); !errors.As(err, &de) || de.Locked {
		t.Fatalf("one failure and one attempt in flight, threshold 2: %v, want a DeniedError that is no lock", err)
	}
	if err := f.svc.AttemptOutcome(ctx, app, second.AttemptID, auth.ResultSuccess); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(); err != nil {
		t.Errorf("after the attempt in flight succeeded: %v, want the next to go ahead", err)
	}
}

// TestAppUncountedOutcomeKeepsItsPlace: an application's failure that
// could not be counted (Redis refused it: 503) keeps its attempt's place
// towards the lockout until its time runs out, as XCloak's own does
// (TestUncountedFailureKeepsItsPlace), and so does a challenged attempt's
// success, which counts towards the lockout as a failure does
// (appChallengeSucceeded): outcomes that went uncounted let no more
// attempts go ahead than the threshold in the places' time.
func TestAppUncountedOutcomeKeepsItsPlace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		challenge bool
		result    string
	}{{"failure", false, auth.ResultFailure}, {"challenged success", true, auth.ResultSuccess}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *auth.Config) {
				if tc.challenge {
					c.NewDeviceVerification = auth.VerifyAlways
				}
				c.Lockout.Threshold = 3
				c.Limits.SetCount(auth.RuleLoginAccount, 100)
				c.Limits.SetCount(auth.RuleLoginIP, 100)
			}, func(d *app.Deps) { d.Redis.AddHook(failingFailures{}) })
			ctx := t.Context()
			_, key, err := f.svc.AddAPIKey(ctx, "shop", "cli")
			if err != nil {
				t.Fatal(err)
			}
			decide := func() (auth.AttemptDecision, error) {
				return f.svc.Decide(ctx, key, auth.AttemptRequest{Kind: auth.AttemptLogin, Account: "ida", ClientIP: "198.51.100.9"})
			}
			for i := range f.cfg.Lockout.Threshold {
				d, err := decide()
				if err != nil {
					t.Fatalf("attempt %d: %v", i+1, err)
				}
				if d.Challenge != tc.challenge {
					t.Fatalf("attempt %d challenged: %v, want %v", i+1, d.Challenge, tc.challenge)
				}
				if err := f.svc.AttemptOutcome(ctx, key, d.AttemptID, tc.result); !errors.Is(err, auth.ErrUnavailable) {
					t.Fatalf("%s %d, not counted: %v; want unavailable", tc.name, i+1, err)
				}
			}
			var de *auth.DeniedError
			if _, err := decide(); !errors.As(err, &de) {
				t.Errorf("after %d outcomes that went uncounted: %v; want denied", f.cfg.Lockout.Threshold, err)
			}
		})
	}
}

// failingFailures is a Redis hook that answers every count of a failure
// (lockout.lua, whose first key is the identity's failures) with an
// error reply.
type failingFailures struct{}

func (failingFailures) DialHook(next redis.DialHook) redis.DialHook { return next }
func (failingFailures) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(args) > 3 && strings.HasSuffix(fmt.Sprint(args[3]), ":failures") {
			cmd.SetErr(refusal("ERR failure refused by the test"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (failingFailures) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAppPlacesRefusalCountsInItsLimits: an attempt the places refuse
// was admitted by its limits, and counts in them (unlike one the lock
// refuses): a client that asks again and again while the places are taken
// spends its address' limit and is then refused by it, not answered
// afresh by Redis for every request.
func TestAppPlacesRefusalCountsInItsLimits(t *testing.T) {
	const ipLimit = 6
	f := newFixture(t, func(c *auth.Config) {
		c.Lockout.Threshold = 2
		c.Limits.SetCount(auth.RuleLoginAccount, 100)
		c.Limits.SetCount(auth.RuleLoginIP, ipLimit)
	})
	ctx := t.Context()
	_, app, err := f.svc.AddAPIKey(ctx, "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	decide := func() (auth.AttemptDecision, error) {
		return f.svc.Decide(ctx, app, auth.AttemptRequest{Kind: auth.AttemptLogin, Account: "hal", ClientIP: "198.51.100.9"})
	}
	first, err := decide()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.AttemptOutcome(ctx, app, first.AttemptID, auth.ResultFailure); err != nil {
		t.Fatal(err)
	}
	// One failure and this one in flight: the places are taken.
	if _, err := decide(); err != nil {
		t.Fatal(err)
	}
	for i := range ipLimit - 2 {
		var de *auth.DeniedError
		if _, err := decide(); !errors.As(err, &de) || de.Locked || de.RetryAfter <= 0 || de.RetryAfter > time.Second {
			t.Fatalf("attempt %d with the places taken: %v; want a DeniedError, not locked, retry-after in (0, 1s]", i+1, err)
		}
	}
	var de *auth.DeniedError
	if _, err := decide(); !errors.As(err, &de) || de.Locked || de.RetryAfter <= time.Minute {
		t.Fatalf("past the address' limit of %d: %v; want its DeniedError, retry-after past a minute", ipLimit, err)
	}
}
