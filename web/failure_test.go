package web_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/migrations"
	"github.com/xcloak/xcloak/ratelimit"
)

// fastRedis is a client that gives up on a dead Redis as quickly as the
// server's does: it sends nothing again (MaxRetries -1). A stopped test
// server refuses connections, so the timeouts are not what makes it
// quick; they are seconds so that a live Redis answering late on a loaded
// machine, under a burst of sign-ins, is not taken for one gone.
func fastRedis(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	opts.MaxRetries = -1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// statuses fires n sign-ins for email at once (from distinct addresses, so
// only the account limit applies) and counts the answers.
func statuses(t *testing.T, base, email string, n int, firstSource int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	out := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.%d.%d", 20+firstSource/250, 1+(firstSource+i)%250))
		wg.Go(func() {
			resp, _ := post(t, c, base+"/api/v1/login", jsonType, loginJSON(email, "a wrong guess"))
			mu.Lock()
			out[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// backgroundAttack keeps signing in to other accounts until stop, and
// fails the test on any answer outside allowed.
func backgroundAttack(t *testing.T, base string, allowed ...int) (stop func() int64) {
	ok := map[int]bool{}
	for _, s := range allowed {
		ok[s] = true
	}
	done := make(chan struct{})
	var sent atomic.Int64
	var wg sync.WaitGroup
	c := xcloaktest.Client(t, "127.0.30.1")
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			resp, _ := post(t, c, base+"/api/v1/login", jsonType, loginJSON(fmt.Sprintf("bg%d@example.com", i), "guess"))
			sent.Add(1)
			if !ok[resp.StatusCode] {
				t.Errorf("background attack got %d, allowed %v", resp.StatusCode, allowed)
			}
		}
	})
	return func() int64 { close(done); wg.Wait(); return sent.Load() }
}

// TestRedisDiesDuringAttack kills the real Redis behind a running XCloak
// in the middle of an attack, under each failure policy, and restarts it
// empty (scripts lost too).
func TestRedisDiesDuringAttack(t *testing.T) {
	for _, policy := range []ratelimit.FailurePolicy{ratelimit.FailLocal, ratelimit.FailClosed, ratelimit.FailOpen} {
		t.Run(string(policy), func(t *testing.T) {
			srv := testenv.PrivateRedis(t)
			env := xcloaktest.New(t, xcloaktest.Options{
				Redis: fastRedis(t, srv.URL()), Prefix: "xcloak:",
				Auth: func(c *auth.Config) {
					c.RedisFailure = policy
					// Count what Redis and the policy decide, not what the
					// replica remembers of earlier rejections.
					c.RejectionMemory = 0
					c.Lockout.Threshold = 1000
					c.Limits.SetCount(auth.RuleLoginIP, 1000)
				},
			})
			answers := countSignIns(env)
			base := env.Start(t)
			limit := env.Auth.Limits[auth.RuleLoginAccount].Count
			// 401 and 429 always; 503 only where the policy says so.
			allowed := []int{401, 429}
			if policy == ratelimit.FailClosed {
				allowed = append(allowed, 503)
			}
			stop := backgroundAttack(t, base, allowed...)
			env.AddUser(t, "sec@example.com", "admin password", true)
			admin := xcloaktest.Client(t, "127.0.32.1")
			if resp, _ := post(t, admin, base+"/api/v1/login", jsonType, loginJSON("sec@example.com", "admin password")); resp.StatusCode != 200 {
				t.Fatalf("admin sign-in: %d", resp.StatusCode)
			}

			if got := statuses(t, base, "victim@example.com", 2*limit, 0); got[401] != limit || got[429] != limit {
				t.Fatalf("before the crash: %v", got)
			}
			t.Logf("background attack sent %d requests before the crash", stop())
			// Redis restarts empty, losing the counters of what came
			// before; everything answered from here on must reach them.
			env.Flush(t)
			beforeCrash := answers.snapshot()
			srv.Stop()
			stop = backgroundAttack(t, base, allowed...)
			got := statuses(t, base, "victim@example.com", 3*limit, 100)
			switch policy {
			case ratelimit.FailLocal:
				if got[401] != limit || got[429] != 2*limit {
					t.Fatalf("Redis down, local policy: %v; want the limit held in process (%d x 401)", got, limit)
				}
			case ratelimit.FailClosed:
				if got[503] != 3*limit {
					t.Fatalf("Redis down, closed policy: %v; want every attempt refused with 503", got)
				}
			case ratelimit.FailOpen:
				if got[401] != 3*limit {
					t.Fatalf("Redis down, open policy: %v; want every attempt admitted", got)
				}
			}
			if !env.Service.Degraded() {
				t.Fatal("service does not report degraded mode with Redis down")
			}
			// The outage's events wait for Redis: counting them now fails.
			if err := env.Service.Flush(context.Background()); err == nil {
				t.Fatal("counting events with Redis down succeeded")
			}
			resp, body := get(t, admin, base+"/api/v1/admin/stats?period=5m")
			if resp.StatusCode != 200 || !strings.Contains(body, `"degraded":true`) || !strings.Contains(body, `"failure_policy":"`+string(policy)+`"`) {
				t.Fatalf("dashboard stats with Redis down: %d %s; want degraded mode shown", resp.StatusCode, body)
			}
			if resp, body := get(t, admin, base+"/admin"); resp.StatusCode != 200 || !strings.Contains(body, "Degraded mode") {
				t.Fatalf("dashboard page with Redis down: %d; want the degraded-mode banner", resp.StatusCode)
			}

			srv.Start()
			began := time.Now()
			for env.Service.Degraded() {
				if time.Since(began) > 20*time.Second {
					t.Fatal("still degraded 20 s after Redis came back")
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("shared limits back %v after Redis restarted", time.Since(began).Round(time.Millisecond))
			if _, body := get(t, admin, base+"/api/v1/admin/stats?period=5m"); !strings.Contains(body, `"degraded":false`) {
				t.Fatalf("dashboard stats after recovery: %s", body)
			}
			if got := statuses(t, base, "victim@example.com", 2*limit, 200); got[401] != limit || got[429] != limit {
				t.Fatalf("after recovery: %v; want the limit held again by Redis", got)
			}
			t.Logf("background attack sent %d requests across the crash", stop())
			all := answers.snapshot()
			checkNothingLost(t, env, admin, base, minus(all, beforeCrash), all)
		})
	}
}

// TestPostgresDiesDuringAttack crashes the real Postgres behind a running
// XCloak: sign-ins that need the database answer 503, rejections still
// answer 429 (they never touch it), nothing half-written remains, and
// everything works again when it is back, without a restart.
func TestPostgresDiesDuringAttack(t *testing.T) {
	pg := migratedPrivatePostgres(t)
	rdb, prefix := testenv.Redis(t)
	env := xcloaktest.New(t, xcloaktest.Options{DatabaseURL: pg.URL(), Redis: rdb, Prefix: prefix,
		Auth: func(c *auth.Config) { c.Lockout.Threshold = 1000; c.Limits.SetCount(auth.RuleLoginIP, 1000) }})
	answers := countSignIns(env)
	base := env.Start(t)
	env.AddUser(t, "ann@example.com", "correct horse", false)
	stop := backgroundAttack(t, base, 401, 429, 503)
	ann := xcloaktest.Client(t, "127.0.31.1")
	if resp, _ := post(t, ann, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "correct horse")); resp.StatusCode != 200 {
		t.Fatalf("before the crash: %d", resp.StatusCode)
	}

	pg.Stop()
	if resp, body := post(t, ann, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "correct horse")); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("sign-in with Postgres down: %d %s; want 503 with Retry-After", resp.StatusCode, body)
	}
	got := statuses(t, base, "victim@example.com", 20, 0)
	if got[503] != env.Auth.Limits[auth.RuleLoginAccount].Count || got[429] != 20-env.Auth.Limits[auth.RuleLoginAccount].Count {
		t.Fatalf("attack with Postgres down: %v; want 503 for the admitted, 429 for the rest", got)
	}
	if resp, _ := get(t, ann, base+"/readyz"); resp.StatusCode != 503 {
		t.Fatalf("/readyz with Postgres down: %d", resp.StatusCode)
	}
	// The outage's events wait for Postgres: writing them now fails.
	if err := env.Service.Flush(context.Background()); err == nil {
		t.Fatal("writing events with Postgres down succeeded")
	}

	pg.Start()
	began := time.Now()
	for {
		resp, _ := post(t, ann, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "correct horse"))
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != 503 || time.Since(began) > 20*time.Second {
			t.Fatalf("after Postgres came back: %d after %v", resp.StatusCode, time.Since(began))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("sign-in works %v after Postgres restarted", time.Since(began).Round(time.Millisecond))
	t.Logf("background attack sent %d requests across the crash", stop())

	env.Flush(t)
	var sessions, succeeded int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM sessions`).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM security_events WHERE kind = 'login_succeeded'`).Scan(&succeeded); err != nil {
		t.Fatal(err)
	}
	// The second sign-in rotated the first session away.
	if sessions != 1 || succeeded != 2 {
		t.Fatalf("%d sessions and %d success events after two sign-ins around the crash; want 1 and 2 (nothing lost, nothing half-written)", sessions, succeeded)
	}
	env.AddUser(t, "sec@example.com", "admin password", true)
	admin := xcloaktest.Client(t, "127.0.32.1")
	signIn(t, admin, base, "sec@example.com", "admin password")
	all := answers.snapshot()
	checkNothingLost(t, env, admin, base, all, all)
}

// migratedPrivatePostgres is a Postgres server of the test's own, which it
// may stop and start, with XCloak's schema.
func migratedPrivatePostgres(t *testing.T) *testenv.PostgresServer {
	t.Helper()
	pg := testenv.PrivatePostgres(t)
	if _, err := migrations.Up(context.Background(), pg.URL()); err != nil {
		t.Fatal(err)
	}
	return pg
}
