package ratelimit_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// exampleRedis connects to the tests' Redis and returns a key prefix no
// other run uses, with a function that deletes its keys.
func exampleRedis() (*redis.Client, string, func()) {
	opts, err := redis.ParseURL(testenv.RedisURL())
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(opts)
	prefix := "xcloak-example:" + rand.Text()[:12] + ":"
	return rdb, prefix, func() {
		ctx := context.Background()
		it := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for it.Next(ctx) {
			rdb.Del(ctx, it.Val())
		}
		rdb.Close()
	}
}

// One rule: five sign-ins a minute per client network. The sixth request
// is refused, with the time after which a retry is admitted.
func ExampleLimiter_Allow() {
	rdb, prefix, done := exampleRedis()
	defer done()
	limiter, err := ratelimit.NewLimiter(rdb, prefix)
	if err != nil {
		panic(err)
	}
	rule := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.7", Limit: ratelimit.PerMinute(5)}
	for i := 1; i <= 6; i++ {
		res, err := limiter.Allow(context.Background(), rule)
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: allowed %v, remaining %d, retry within a minute %v\n",
			i, res.Allowed, res.Remaining, res.RetryAfter > 0 && res.RetryAfter <= time.Minute)
	}
	// Output:
	// request 1: allowed true, remaining 4, retry within a minute false
	// request 2: allowed true, remaining 3, retry within a minute false
	// request 3: allowed true, remaining 2, retry within a minute false
	// request 4: allowed true, remaining 1, retry within a minute false
	// request 5: allowed true, remaining 0, retry within a minute false
	// request 6: allowed false, remaining 0, retry within a minute true
}

// A sign-in is decided by several rules at once, in one round trip: it is
// admitted only if every rule admits it, and a request one rule refuses
// counts in none, so a flood against one account does not use up its
// network's allowance.
func ExampleLimiter_AllowAll() {
	rdb, prefix, done := exampleRedis()
	defer done()
	limiter, err := ratelimit.NewLimiter(rdb, prefix)
	if err != nil {
		panic(err)
	}
	network := ratelimit.Rule{Name: "login_ip", ID: "192.0.2.7", Limit: ratelimit.PerMinute(50)}
	account := ratelimit.Rule{Name: "login_account", ID: "ann@example.com", Limit: ratelimit.PerMinute(2)}
	for i := 1; i <= 3; i++ {
		d, err := limiter.AllowAll(context.Background(), network, account)
		if err != nil {
			panic(err)
		}
		rejected := ""
		for _, r := range d.Rejected() {
			rejected += " " + r.Name
		}
		fmt.Printf("attempt %d: allowed %v, network count %d, rejected by:%s\n", i, d.Allowed, d.Results[0].Count, rejected)
	}
	// Output:
	// attempt 1: allowed true, network count 1, rejected by:
	// attempt 2: allowed true, network count 2, rejected by:
	// attempt 3: allowed false, network count 2, rejected by: login_account
}

// Failures lock an identity at the threshold, exactly once however many
// arrive together; while locked, a Lockable rule of the same name refuses
// it in the same step as its count, and Clear ends the lock.
func ExampleLockouts() {
	rdb, prefix, done := exampleRedis()
	defer done()
	ctx := context.Background()
	policy := ratelimit.LockoutPolicy{Threshold: 3, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour}
	lockouts, err := ratelimit.NewLockouts(rdb, prefix, "login_account", policy)
	if err != nil {
		panic(err)
	}
	limiter, err := ratelimit.NewLimiter(rdb, prefix)
	if err != nil {
		panic(err)
	}
	rule := ratelimit.Rule{Name: "login_account", ID: "ann@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}
	for i := 1; i <= 3; i++ {
		f, err := lockouts.Fail(ctx, rule.ID, "")
		if err != nil {
			panic(err)
		}
		fmt.Printf("failure %d: locked now %v, level %d, for %v\n", i, f.LockedNow, f.Level, f.LockedFor.Round(time.Minute))
	}
	res, err := limiter.Allow(ctx, rule)
	if err != nil {
		panic(err)
	}
	fmt.Printf("while locked: allowed %v, locked %v\n", res.Allowed, res.Locked)
	if _, err := lockouts.Clear(ctx, rule.ID); err != nil {
		panic(err)
	}
	res, err = limiter.Allow(ctx, rule)
	if err != nil {
		panic(err)
	}
	fmt.Printf("after Clear: allowed %v\n", res.Allowed)
	// Output:
	// failure 1: locked now false, level 0, for 0s
	// failure 2: locked now false, level 0, for 0s
	// failure 3: locked now true, level 1, for 15m0s
	// while locked: allowed false, locked true
	// after Clear: allowed true
}

// A RedisStore keeps the lockouts of each lockable rule name it is given a
// policy for. After an unlock the level stays, so the next lock lasts
// twice as long; a Local store, or a Failover of the two, answers alike.
func ExampleRedisStore() {
	rdb, prefix, done := exampleRedis()
	defer done()
	ctx := context.Background()
	policy := ratelimit.LockoutPolicy{Threshold: 2, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour}
	shared, err := ratelimit.NewRedisStore(rdb, prefix, map[string]ratelimit.LockoutPolicy{"login_account": policy})
	if err != nil {
		panic(err)
	}
	var store ratelimit.Store = shared // what the callers hold
	rule := ratelimit.Rule{Name: "login_account", ID: "ann@example.com", Limit: ratelimit.PerMinute(100), Lockable: true}
	for lock := 1; lock <= 2; lock++ {
		var f ratelimit.Failure
		for range policy.Threshold {
			if f, err = store.Fail(ctx, rule.Name, rule.ID, ""); err != nil {
				panic(err)
			}
		}
		d, err := store.AllowAll(ctx, rule)
		if err != nil {
			panic(err)
		}
		fmt.Printf("lock %d: level %d for %v; sign-in allowed %v\n", lock, f.Level, f.LockedFor, d.Allowed)
		if _, err := store.Clear(ctx, rule.Name, rule.ID); err != nil {
			panic(err)
		}
	}
	// Output:
	// lock 1: level 1 for 15m0s; sign-in allowed false
	// lock 2: level 2 for 30m0s; sign-in allowed false
}
