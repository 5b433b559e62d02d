package auth_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached"
	"github.com/xcloak/xcloak/breached/breachedtest"
	"github.com/xcloak/xcloak/internal/app"
)

// withBreached gives a fixture's service a breach corpus.
func withBreached(c auth.BreachedChecker) func(*app.Deps) {
	return func(d *app.Deps) { d.Breached = c }
}

// TestBreachedNewPasswordRefused: every way of setting a password refuses
// one found in the corpus, read from range files and from a range API,
// and takes one that is not.
func TestBreachedNewPasswordRefused(t *testing.T) {
	corpus := breachedtest.New(t)
	corpus.Add(t, "password123", "letmein!!")
	sources := map[string]auth.BreachedChecker{"directory": corpus.Checker(t)}
	api, err := openChecker(corpus.Serve(t))
	if err != nil {
		t.Fatal(err)
	}
	sources["range API"] = api
	for name, checker := range sources {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil, withBreached(checker))
			if _, err := f.svc.CreateUser(t.Context(), "ann@example.com", "password123", false, "cli"); !errors.Is(err, auth.ErrBreachedPassword) {
				t.Fatalf("CreateUser with a breached password: %v, want ErrBreachedPassword", err)
			}
			f.addUser(t, "ann@example.com", "not in any corpus", false)
			if err := f.svc.SetPassword(t.Context(), "ann@example.com", "letmein!!", "cli"); !errors.Is(err, auth.ErrBreachedPassword) {
				t.Fatalf("SetPassword with a breached password: %v, want ErrBreachedPassword", err)
			}
			// A link that is none is refused before the password is
			// looked up (or hashed): the lookup is for a live link only.
			forged := strings.Repeat("A", 43)
			if err := f.svc.ConfirmReset(t.Context(), forged, "password123", client("192.0.2.1")); !errors.Is(err, auth.ErrInvalidToken) {
				t.Fatalf("ConfirmReset with no such link and a breached password: %v, want ErrInvalidToken", err)
			}
			token := requestResetToken(t, f, "ann@example.com")
			if err := f.svc.ConfirmReset(t.Context(), token, "password123", client("192.0.2.1")); !errors.Is(err, auth.ErrBreachedPassword) {
				t.Fatalf("ConfirmReset with a breached password: %v, want ErrBreachedPassword", err)
			}
			// The refusal spent nothing: the token still works.
			if err := f.svc.ConfirmReset(t.Context(), token, "a fresh one, unbreached", client("192.0.2.1")); err != nil {
				t.Fatalf("ConfirmReset after the refusal: %v", err)
			}
			if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "a fresh one, unbreached", Client: client("192.0.2.1")}); err != nil {
				t.Fatalf("sign-in with the new password: %v", err)
			}
		})
	}
}

// failingAPIs are range APIs that cannot answer a lookup: one that
// fails, one that answers after the lookup's bound, and two that answer
// 200 with no range (a URL that names no range API, a mirror gone wrong).
func failingAPIs(t *testing.T) map[string]auth.BreachedChecker {
	t.Helper()
	release := make(chan struct{})
	handlers := map[string]http.HandlerFunc{
		"server error": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusServiceUnavailable)
		},
		"a page, not a range": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1></body></html>\n")
		},
		"empty range": func(w http.ResponseWriter, r *http.Request) {},
		"no answer in time": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		},
	}
	checkers := map[string]auth.BreachedChecker{}
	for name, h := range handlers {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		c, err := breached.Open(srv.URL, 100*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkers[name] = c
	}
	t.Cleanup(func() { close(release) })
	return checkers
}

// answering passes every password as not breached while it is set, and
// otherwise asks the checker it wraps.
type answering struct {
	auth.BreachedChecker
	pass atomic.Bool
}

func (a *answering) Breached(ctx context.Context, password string) (bool, error) {
	if a.pass.Load() {
		return false, nil
	}
	return a.BreachedChecker.Breached(ctx, password)
}

// TestBreachedLookupFailureRefusesNoOne: a range API that fails, does not
// answer in time or answers with no range refuses no one: it lets new
// passwords be set and known devices sign in as usual, unrestricted, and
// holds a new browser's sign-in, as breached passwords are held (web's
// TestBreachedLookupFailureHolds has the answers alike); and each failed
// lookup is counted and logged, saying why.
func TestBreachedLookupFailureRefusesNoOne(t *testing.T) {
	for name, failing := range failingAPIs(t) {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			logs := &logBuffer{}
			checker := &answering{BreachedChecker: failing}
			f := newFixture(t, nil, withBreached(checker), func(d *app.Deps) {
				d.Metrics = reg
				d.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			})
			f.addUser(t, "ann@example.com", "password123", false)
			// The browser became known while the corpus answered.
			checker.pass.Store(true)
			first, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.1")})
			checker.pass.Store(false)
			if err != nil {
				t.Fatal(err)
			}
			res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.1"), DeviceCookie: first.Device.Value})
			if err != nil {
				t.Fatalf("known device while lookups fail: %v", err)
			}
			if res.Session.MustChangePassword {
				t.Error("a failed lookup restricted the session")
			}
			if _, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "a wrong one", Client: client("192.0.2.2")}); !errors.Is(err, auth.ErrVerificationRequired) {
				t.Errorf("a new browser while lookups fail: %v, want ErrVerificationRequired", err)
			}
			// One lookup for the new account, one for the known device's
			// sign-in and one for the new browser's.
			want := `
# HELP xcloak_breached_lookup_failures_total Breached-password lookups that failed or timed out; a sign-in from a new browser was held, anything else taken as not breached.
# TYPE xcloak_breached_lookup_failures_total counter
xcloak_breached_lookup_failures_total 3
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "xcloak_breached_lookup_failures_total"); err != nil {
				t.Error(err)
			}
			if got := strings.Count(logs.String(), `"msg":"breached-password lookup failed"`); got != 3 {
				t.Errorf("%d warnings of a failed lookup, want 3; log:\n%s", got, logs)
			}
			if strings.Contains(name, "range") && !strings.Contains(logs.String(), "with no range") {
				t.Errorf("the warnings do not say the answer was no range; log:\n%s", logs)
			}
		})
	}
}

// TestKnownDeviceBreachedPasswordRestricted: a known device that signs in
// with the right password, once it is in the corpus, gets a session that
// must change it; before, and with a password not in the corpus, a free
// one.
func TestKnownDeviceBreachedPasswordRestricted(t *testing.T) {
	corpus := breachedtest.New(t)
	f := newFixture(t, nil, withBreached(corpus.Checker(t)))
	f.addUser(t, "ann@example.com", "password123", false)
	login := func(cookie string) auth.LoginResult {
		t.Helper()
		res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.1"), DeviceCookie: cookie})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := login("")
	if login(first.Device.Value).Session.MustChangePassword {
		t.Fatal("a password not in the corpus restricted the session")
	}
	corpus.Add(t, "password123")
	res := login(first.Device.Value)
	if !res.Session.MustChangePassword {
		t.Fatal("a known device with a breached password got a free session")
	}
	stored, err := f.svc.Session(t.Context(), res.Session.Token)
	if err != nil || !stored.MustChangePassword {
		t.Fatalf("the stored session: %+v, %v; want MustChangePassword", stored, err)
	}
}

// overlapping answers every lookup "not breached" and notes the most that
// ran at once. Once paired is set, a lookup answers only once two have run
// at once, or ten seconds have passed: the bound is only there so that
// lookups made one after the other end, since under load the second of two
// made at once may take well over a second to begin.
type overlapping struct {
	paired         atomic.Bool
	inFlight, most atomic.Int32
}

func (o *overlapping) Breached(ctx context.Context, _ string) (bool, error) {
	n := o.inFlight.Add(1)
	defer o.inFlight.Add(-1)
	for {
		if most := o.most.Load(); n <= most || o.most.CompareAndSwap(most, n) {
			break
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for o.paired.Load() && o.most.Load() < 2 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	return false, nil
}

// TestBreachedFormsLookedUpAtOnce: a password whose NFKC form differs
// from what was typed is looked up in both forms at once, so that a slow
// corpus holds it for one XCLOAK_BREACHED_TIMEOUT, not two.
func TestBreachedFormsLookedUpAtOnce(t *testing.T) {
	checker := &overlapping{}
	f := newFixture(t, nil, withBreached(checker))
	f.addUser(t, "ann@example.com", "old password", false)
	token := requestResetToken(t, f, "ann@example.com")
	checker.most.Store(0)
	checker.paired.Store(true)
	if err := f.svc.ConfirmReset(t.Context(), token, "\uff30assword for ann", client("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	if most := checker.most.Load(); most != 2 {
		t.Errorf("at most %d lookups at once for a password of two forms, want 2", most)
	}
}

// TestBreachedAsTyped: a password breached in the form it is typed in,
// other than its NFKC form (a decomposed accent, as some keyboards type
// it), is refused though its NFKC form is in no corpus.
func TestBreachedAsTyped(t *testing.T) {
	typed := "cafe\u0301 au lait"
	corpus := breachedtest.New(t)
	corpus.Add(t, typed)
	f := newFixture(t, nil, withBreached(corpus.Checker(t)))
	f.addUser(t, "ann@example.com", "old password", false)
	token := requestResetToken(t, f, "ann@example.com")
	if err := f.svc.ConfirmReset(t.Context(), token, typed, client("192.0.2.1")); !errors.Is(err, auth.ErrBreachedPassword) {
		t.Fatalf("ConfirmReset with a password breached as typed: %v, want ErrBreachedPassword", err)
	}
}
