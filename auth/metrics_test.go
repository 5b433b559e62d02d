package auth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/app"
)

func TestMetricsCountDecisions(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 3) }, func(d *app.Deps) { d.Metrics = reg })
	f.addUser(t, "ann@example.com", "correct horse", false)
	login := func(password string) error {
		_, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: password, Client: client("192.0.2.1")})
		return err
	}
	if err := login("correct horse"); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := login("wrong"); err != nil && !errors.Is(err, auth.ErrInvalidCredentials) && !errors.Is(err, auth.ErrLimited) {
			t.Fatal(err)
		}
	}
	want := `
# HELP xcloak_signin_attempts_total Sign-in requests received, rejected and malformed ones included.
# TYPE xcloak_signin_attempts_total counter
xcloak_signin_attempts_total 5
# HELP xcloak_signin_failures_total Sign-ins that reached password checking and failed (wrong password or unknown account).
# TYPE xcloak_signin_failures_total counter
xcloak_signin_failures_total 2
# HELP xcloak_signin_successes_total Sign-ins that succeeded.
# TYPE xcloak_signin_successes_total counter
xcloak_signin_successes_total 1
# HELP xcloak_rejected_total Requests rejected before any password checking, by the rule that rejected them (lockout for a locked account).
# TYPE xcloak_rejected_total counter
xcloak_rejected_total{rule="login_account"} 2
# HELP xcloak_redis_degraded 1 while Redis is unreachable and limits follow the failure policy.
# TYPE xcloak_redis_degraded gauge
xcloak_redis_degraded{policy="local"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"xcloak_signin_attempts_total", "xcloak_signin_failures_total", "xcloak_signin_successes_total",
		"xcloak_rejected_total", "xcloak_redis_degraded"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "xcloak_limiter_decision_seconds"); n != 1 {
		t.Fatalf("decision histogram: %d series", n)
	}
}

// TestDecisionHistogramLeavesOutMemory: xcloak_limiter_decision_seconds
// times the decisions Redis made, and not the rejections the memory of
// rejections answered, which took no round trip: under a flood they would
// bury the round trips' times.
func TestDecisionHistogramLeavesOutMemory(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleResetAccount, 1) }, func(d *app.Deps) { d.Metrics = reg })
	timed := func() uint64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range families {
			if mf.GetName() == "xcloak_limiter_decision_seconds" {
				return mf.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		return 0
	}
	var added []uint64
	for range 3 {
		before := timed()
		if err := f.svc.RequestReset(t.Context(), "ann@example.com", client("192.0.2.1")); err != nil && !errors.Is(err, auth.ErrLimited) {
			t.Fatal(err)
		}
		added = append(added, timed()-before)
	}
	// An admission and a rejection by Redis, then one from memory.
	if fmt.Sprint(added) != "[1 1 0]" {
		t.Errorf("three reset requests added %v decisions to the histogram, want [1 1 0]", added)
	}
}

// TestClientGoneIsNoPostgresError: a Postgres call cut short because its
// caller gave up (a client that hung up) is no Postgres error: counted in
// xcloak_postgres_errors_total, on which XCloakPostgresErrors pages, every
// impatient client and every flood's bots closing their connections
// would page for a database that answers. A call that failed still
// counts.
func TestClientGoneIsNoPostgresError(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, nil, func(d *app.Deps) { d.Metrics = reg })
	f.addUser(t, "ann@example.com", "correct horse", false)
	errorsCounted := func(want int) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP xcloak_postgres_errors_total Postgres calls that failed.
# TYPE xcloak_postgres_errors_total counter
xcloak_postgres_errors_total %d
`, want)), "xcloak_postgres_errors_total"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.svc.UserByEmail(ctx, "ann@example.com"); !errors.Is(err, context.Canceled) {
		t.Fatalf("reading an account for a caller gone: %v, want its cancellation", err)
	}
	errorsCounted(0)

	if _, err := f.db.Exec(t.Context(), `ALTER TABLE users RENAME TO users_gone`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.UserByEmail(t.Context(), "ann@example.com"); !errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("reading an account without its table: %v, want ErrUnavailable", err)
	}
	errorsCounted(1)
}
