package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached/breachedtest"
	"github.com/xcloak/xcloak/internal/app"
)

// hangingUp is a breach corpus whose next lookup's client hangs up as the
// lookup begins: hangUp, once set, is called before the corpus is asked.
// A client that closes only its side of the connection (a half-close)
// ends its request's context so, and still reads the answer.
type hangingUp struct {
	auth.BreachedChecker
	hangUp atomic.Pointer[context.CancelFunc]
}

func (h *hangingUp) Breached(ctx context.Context, password string) (bool, error) {
	if hangUp := h.hangUp.Swap(nil); hangUp != nil {
		(*hangUp)()
	}
	return h.BreachedChecker.Breached(ctx, password)
}

// TestKnownDeviceBreachedPasswordRestrictedWhenTheClientHangsUp: a known
// device whose client hangs up as its breached password is looked up
// still gets a session that can only change the password. The sign-in is
// decided and its session made whether or not the client waits; a lookup
// cut short with the request would be taken as a corpus that failed, not
// breached, and a client that half-closes its connection there, reading
// the answer all the same, would sign in free of the restriction.
func TestKnownDeviceBreachedPasswordRestrictedWhenTheClientHangsUp(t *testing.T) {
	corpus := breachedtest.New(t)
	checker := &hangingUp{BreachedChecker: corpus.Checker(t)}
	f := newFixture(t, nil, withBreached(checker))
	f.addUser(t, "hung-breached@example.com", "password123", false)
	first, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "hung-breached@example.com", Password: "password123", Client: client("192.0.2.41")})
	if err != nil {
		t.Fatal(err)
	}
	corpus.Add(t, "password123")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	checker.hangUp.Store(&cancel)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "hung-breached@example.com", Password: "password123",
		Client: client("192.0.2.41"), DeviceCookie: first.Device.Value})
	if checker.hangUp.Load() != nil {
		t.Fatal("the sign-in looked nothing up")
	}
	if err != nil {
		t.Fatalf("Login whose client hung up as its password was looked up: %v; want it done", err)
	}
	if !res.Session.MustChangePassword {
		t.Error("a known device whose client hung up at the lookup got a session free of its breached password")
	}
	stored, err := f.svc.Session(t.Context(), res.Session.Token)
	if err != nil || !stored.MustChangePassword {
		t.Errorf("the stored session: %+v, %v; want MustChangePassword", stored, err)
	}
}

// TestClientGoneIsNoBreachedLookupFailure: a lookup cut short because its
// client hung up says nothing about the corpus. Counted in
// xcloak_breached_lookup_failures_total, on which
// XCloakBreachedLookupsFailing fires, and logged as a failed lookup, a
// trickle of clients closing their connections mid sign-in would raise
// the alert with the corpus answering. The sign-in of a new browser is
// still not let through on such an answer.
func TestClientGoneIsNoBreachedLookupFailure(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	checker := &hangingUp{BreachedChecker: breachedtest.New(t).Checker(t)}
	f := newFixture(t, nil, withBreached(checker), func(d *app.Deps) {
		d.Metrics = reg
		d.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	f.addUser(t, "gone-lookup@example.com", "password123", false)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	checker.hangUp.Store(&cancel)
	if _, err := f.svc.Login(ctx, auth.LoginRequest{Email: "gone-lookup@example.com", Password: "password123", Client: client("192.0.2.42")}); err == nil {
		t.Error("a new browser whose client hung up at the lookup signed in")
	} else if errors.Is(err, auth.ErrInvalidCredentials) {
		t.Errorf("a right password whose client hung up at the lookup: %v", err)
	}
	if checker.hangUp.Load() != nil {
		t.Fatal("the sign-in looked nothing up")
	}
	want := `
# HELP xcloak_breached_lookup_failures_total Breached-password lookups that failed or timed out; a sign-in from a new browser was held, anything else taken as not breached.
# TYPE xcloak_breached_lookup_failures_total counter
xcloak_breached_lookup_failures_total 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "xcloak_breached_lookup_failures_total"); err != nil {
		t.Error(err)
	}
	if strings.Contains(logs.String(), `"msg":"breached-password lookup failed"`) {
		t.Errorf("a lookup whose client hung up was logged as failed:\n%s", logs)
	}
}
