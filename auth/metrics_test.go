package auth_test

import (
	"errors"
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
