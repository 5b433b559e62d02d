package auth_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/app"
)

// hungUp tags the context of a request that hangUpAt may hang up; work
// detached from it (afterDecision) keeps the tag.
type hungUp struct{}

// hangUpAt is a Redis hook that hangs up a tagged request at its at-th
// Redis command, counting those of the work detached from it: as the
// command is sent, or, with answered, once Redis has answered it. at 0
// hangs up nothing and only counts.
type hangUpAt struct {
	mu       sync.Mutex
	at, seen int
	answered bool
	cancel   context.CancelFunc
}

func (h *hangUpAt) arm(at int, answered bool, cancel context.CancelFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at, h.seen, h.answered, h.cancel = at, 0, answered, cancel
}

// commands is how many commands the tagged requests sent since arm.
func (h *hangUpAt) commands() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen
}

// next counts a command of ctx and returns the hang-up due with it, if
// any.
func (h *hangUpAt) next(ctx context.Context) (hangUp context.CancelFunc, answered bool) {
	if ctx.Value(hungUp{}) == nil {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen++
	if h.seen != h.at || h.cancel == nil {
		return nil, false
	}
	return h.cancel, h.answered
}

func (*hangUpAt) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *hangUpAt) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		hangUp, answered := h.next(ctx)
		if hangUp != nil && !answered {
			hangUp()
		}
		err := next(ctx, cmd)
		if hangUp != nil && answered {
			hangUp()
		}
		return err
	}
}
func (h *hangUpAt) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		hangUp, answered := h.next(ctx)
		if hangUp != nil && !answered {
			hangUp()
		}
		err := next(ctx, cmds)
		if hangUp != nil && answered {
			hangUp()
		}
		return err
	}
}

// sweepHangUps runs try once to count the Redis commands of a tagged
// request, then once for each command, hung up as it is sent and once it
// is answered, with the run's number; check then checks what the run
// did. Once every run is checked, as many goroutines run as after the
// first, which no one hung up on.
func sweepHangUps(t *testing.T, hook *hangUpAt, try func(ctx context.Context, run int), check func(run, at int, answered bool)) {
	t.Helper()
	hook.arm(0, false, nil)
	try(context.WithValue(t.Context(), hungUp{}, true), 0)
	check(0, 0, false)
	n := hook.commands()
	if n == 0 {
		t.Fatal("the request sent Redis nothing")
	}
	before := runtime.NumGoroutine()
	defer settledGoroutines(t, before)
	run := 1
	for at := 1; at <= n; at++ {
		for _, answered := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.WithValue(t.Context(), hungUp{}, true))
			hook.arm(at, answered, cancel)
			try(ctx, run)
			cancel()
			check(run, at, answered)
			run++
		}
	}
}

// settledGoroutines waits until no more goroutines run than before, a
// few of the service's own (a mail being sent, a flush) allowed for, and
// fails if they do not settle: a hang-up left work running.
func settledGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		now := runtime.NumGoroutine()
		if now <= before+5 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after the hang-ups, %d before:\n%s", now, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSignInHungUpAnywhereGivesNoFreeGuess: a wrong password whose client
// hangs up at any of the sign-in's Redis commands, as it is sent or once
// it is answered, is counted towards the lockout whenever it was hashed:
// no hang-up checks a guess for free. And no hang-up leaves a goroutine
// behind.
func TestSignInHungUpAnywhereGivesNoFreeGuess(t *testing.T) {
	hook := &hangUpAt{}
	hasher, err := auth.NewHasher(fastParams, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hashes := auth.CountHashes(hasher)
	f := newFixture(t, func(c *auth.Config) {
		c.Lockout.Threshold = 1
		for _, r := range []string{auth.RuleLoginIP, auth.RuleLoginNetwork, auth.RuleLoginSite} {
			c.Limits.SetCount(r, 100_000)
		}
	}, func(d *app.Deps) {
		d.Redis.AddHook(hook)
		d.Hasher = hasher
	})
	var hashed bool
	sweepHangUps(t, hook, func(ctx context.Context, run int) {
		email := fmt.Sprintf("sweep-signin-%d@example.com", run)
		f.addUser(t, email, "the right one", false)
		n := hashes.Load()
		f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: fmt.Sprint("wrong guess ", run), Client: client("192.0.2.51")})
		hashed = hashes.Load() > n
	}, func(run, at int, answered bool) {
		email := fmt.Sprintf("sweep-signin-%d@example.com", run)
		_, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: email, Password: "the right one", Client: client("192.0.2.51")})
		if run == 0 && (!hashed || !errors.Is(err, auth.ErrLimited)) {
			t.Fatalf("the guess no one hung up on: hashed %v, then the right password %v; want hashed and locked", hashed, err)
		}
		if hashed && !errors.Is(err, auth.ErrLimited) {
			t.Errorf("hung up at command %d (answered %v): the guess was hashed, and the right password then: %v; want the account locked", at, answered, err)
		}
	})
}

// TestSecondStepHungUpAnywhereGivesNoFreeCode: a wrong second-step code
// whose client hangs up at any of the step's Redis commands is counted
// towards the lock of the account's second step whenever it was checked.
func TestSecondStepHungUpAnywhereGivesNoFreeCode(t *testing.T) {
	hook := &hangUpAt{}
	f := newFixture(t, func(c *auth.Config) {
		c.Limits.SetCount(auth.RuleMFAAccount, 1)
		for _, r := range []string{auth.RuleMFANetwork, auth.RuleMFASite, auth.RuleLoginIP, auth.RuleLoginNetwork, auth.RuleLoginSite} {
			c.Limits.SetCount(r, 100_000)
		}
	}, func(d *app.Deps) { d.Redis.AddHook(hook) })
	type account struct {
		secret string
		step   auth.MFAStep
		cookie string
	}
	accounts := map[int]account{}
	sweepHangUps(t, hook, func(ctx context.Context, run int) {
		email := fmt.Sprintf("sweep-step-%d@example.com", run)
		f.addUser(t, email, "password123", false)
		res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: email, Password: "password123", Client: client("192.0.2.52")})
		if err != nil {
			t.Fatal(err)
		}
		secret, _ := confirmTOTP(t, f, res)
		step, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: email, Password: "password123", Client: client("192.0.2.52"), DeviceCookie: res.Device.Value})
		if !errors.Is(err, auth.ErrMFARequired) {
			t.Fatalf("second sign-in: %v, want ErrMFARequired", err)
		}
		accounts[run] = account{secret, step.MFA, res.Device.Value}
		if err := f.svc.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		right := totpAt(t, secret, time.Now())
		wrong := wrongCode(right)
		f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding, Code: wrong,
			Client: client("192.0.2.52"), Cookie: func(string) string { return res.Device.Value }})
	}, func(run, at int, answered bool) {
		a := accounts[run]
		if err := f.svc.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		checked := false
		for _, e := range eventsOfKinds(t, f, auth.EventMFAFailed) {
			if e.account == fmt.Sprintf("sweep-step-%d@example.com", run) {
				checked = true
			}
		}
		_, err := f.svc.SecondStep(t.Context(), auth.SecondStepRequest{Token: a.step.Token, Binding: a.step.Binding,
			Code: totpAt(t, a.secret, time.Now()), Client: client("192.0.2.52"), Cookie: func(string) string { return a.cookie }})
		if run == 0 && (!checked || !errors.Is(err, auth.ErrLimited)) {
			t.Fatalf("the code no one hung up on: checked %v, then the right code %v; want checked and locked", checked, err)
		}
		if checked && !errors.Is(err, auth.ErrLimited) {
			t.Errorf("hung up at command %d (answered %v): the wrong code was checked, and the right one then: %v; want the step locked", at, answered, err)
		}
	})
}

// TestOutcomeHungUpAnywhereLosesNoFailure: an application's report of a
// failed sign-in whose request is cut at any of its Redis commands either
// leaves the attempt to be reported again or is counted: an attempt
// spent with its failure lost would be a guess checked for free.
func TestOutcomeHungUpAnywhereLosesNoFailure(t *testing.T) {
	hook := &hangUpAt{}
	f := newFixture(t, func(c *auth.Config) {
		c.Lockout.Threshold = 1
		for _, r := range []string{auth.RuleLoginIP, auth.RuleLoginNetwork, auth.RuleLoginSite} {
			c.Limits.SetCount(r, 100_000)
		}
	}, func(d *app.Deps) { d.Redis.AddHook(hook) })
	_, key, err := f.svc.AddAPIKey(t.Context(), "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]string{}
	decide := func(run int) (auth.AttemptDecision, error) {
		return f.svc.Decide(t.Context(), key, auth.AttemptRequest{Kind: auth.AttemptLogin, Account: fmt.Sprintf("sweep-outcome-%d", run), ClientIP: "198.51.100.53"})
	}
	sweepHangUps(t, hook, func(ctx context.Context, run int) {
		d, err := decide(run)
		if err != nil {
			t.Fatal(err)
		}
		ids[run] = d.AttemptID
		f.svc.AttemptOutcome(ctx, key, d.AttemptID, auth.ResultFailure)
	}, func(run, at int, answered bool) {
		spent := errors.Is(f.svc.AttemptOutcome(context.Background(), key, ids[run], auth.ResultFailure), auth.ErrUnknownAttempt)
		_, err := decide(run)
		locked := errors.Is(err, auth.ErrLimited)
		if run == 0 && (!spent || !locked) {
			t.Fatalf("the outcome no one hung up on: spent %v, then the account locked %v (%v)", spent, locked, err)
		}
		if spent && !locked {
			t.Errorf("hung up at command %d (answered %v): the attempt was spent and its failure not counted (%v)", at, answered, err)
		}
	})
}
