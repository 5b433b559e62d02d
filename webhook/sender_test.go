package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/webhook"
)

var secret = []byte("test-webhook-secret-0123456789abcdef")

// request is one request a receiver got.
type request struct {
	body      []byte
	signature string
	event     webhook.Event
}

// receiver is a real HTTP server that records what it gets and answers
// with answer (nil: 204), given how many requests came before.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(w http.ResponseWriter, req *http.Request, n int)

	mu   sync.Mutex
	got  []request
	came chan struct{} // one value per request, when recorded
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, req *http.Request, n int)) *receiver {
	r := &receiver{t: t, answer: answer, came: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			t.Error(err)
		}
		got := request{body: body, signature: req.Header.Get(webhook.SignatureHeader)}
		if err := json.Unmarshal(body, &got.event); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		r.mu.Lock()
		n := len(r.got)
		r.got = append(r.got, got)
		r.mu.Unlock()
		r.came <- struct{}{}
		if r.answer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		r.answer(w, req, n)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) url() *url.URL {
	u, err := url.Parse(r.srv.URL + "/hooks/xcloak")
	if err != nil {
		r.t.Fatal(err)
	}
	return u
}

func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.got...)
}

// byType returns the events received by their type, each type once: a
// type sent twice is an error of the test. Workers deliver in any order.
func (r *receiver) byType() map[string]webhook.Event {
	r.t.Helper()
	out := map[string]webhook.Event{}
	for _, g := range r.requests() {
		if _, dup := out[g.event.Type]; dup {
			r.t.Errorf("%s sent twice", g.event.Type)
		}
		out[g.event.Type] = g.event
	}
	return out
}

// wait waits for n more requests.
func (r *receiver) wait(n int) {
	r.t.Helper()
	// Bounded, so that a request that never comes fails its test rather
	// than hold the package until go test's own timeout.
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for i := range n {
		select {
		case <-r.came:
		case <-timeout.C:
			r.t.Fatalf("request %d of %d not received within a minute", i+1, n)
		case <-r.t.Context().Done():
			r.t.Fatal("test ended waiting for a request")
		}
	}
}

// hanging is a receiver that answers nothing until the client hangs up
// or the test ends: dead without refusing connections.
func hanging(t *testing.T) *receiver {
	release := make(chan struct{})
	r := newReceiver(t, func(w http.ResponseWriter, req *http.Request, n int) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
	})
	// Registered after the server's Close, so run before it.
	t.Cleanup(func() { close(release) })
	return r
}

// waits records the backoff a Sender asked for, without waiting.
type waits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.got = append(w.got, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.got...)
}

// drops is a DropCounter in memory.
type drops struct{ n atomic.Int64 }

func (d *drops) CountWebhooksDropped(_ context.Context, _ time.Time, n int64) error {
	d.n.Add(n)
	return nil
}

// sender is a Sender of cfg to urls, with its metrics in reg; run starts
// it until the test ends.
type sender struct {
	*webhook.Sender
	reg   *prometheus.Registry
	waits *waits
	drops *drops
}

func newSender(t *testing.T, cfg webhook.Config, urls ...*url.URL) *sender {
	t.Helper()
	cfg.URLs, cfg.Secret = urls, secret
	if cfg.Timeout == 0 {
		// Longer than the default's 5 s, which a loaded machine's pause
		// between a request's arrival and its answer may outlast: the
		// attempt would end and be made again, a request more than the
		// test counts, and a hanging receiver would let its worker go
		// once the attempts ran out. A test of the attempt's bound sets
		// its own.
		cfg.Timeout = time.Minute
	}
	s := &sender{reg: prometheus.NewRegistry(), waits: &waits{}, drops: &drops{}}
	var err error
	s.Sender, err = webhook.New(cfg, webhook.Deps{Metrics: s.reg, Sleep: s.waits.sleep, Dropped: s.drops})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs s until stop is called or the test ends; stop returns once Run
// has.
func (s *sender) run(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return stop
}

// metric is the value of the counter or gauge name with the label value
// label ("" for none).
func (s *sender) metric(t *testing.T, name, label string) float64 {
	t.Helper()
	families, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s{%s}", name, label)
	return 0
}

func lockout(account string) auth.Event {
	return auth.Event{At: time.Date(2026, 11, 30, 21, 0, 0, 123_000_000, time.UTC), Kind: auth.EventLockout,
		Account: account, UserID: 7, Source: "192.0.2.1", Detail: map[string]string{"level": "1", "until": "2026-11-30T21:15:00Z"}}
}

func TestDeliveryIsSignedAndCarriesTheEvent(t *testing.T) {
	r := newReceiver(t, nil)
	s := newSender(t, webhook.Config{}, r.url())
	stop := s.run(t)
	s.EventsWritten([]auth.Event{
		lockout("ann@example.com"),
		{Kind: auth.EventLoginFailed, Account: "ann@example.com"}, // not of interest
	})
	r.wait(1)
	stop()
	got := r.requests()[0]
	if err := webhook.Verify(secret, got.signature, got.body, time.Now()); err != nil {
		t.Errorf("Verify(%q) = %v", got.signature, err)
	}
	want := webhook.Event{ID: got.event.ID, Type: "lockout.started", Time: "2026-11-30T21:00:00.123Z", Data: map[string]string{
		"account": "ann@example.com", "user_id": "7", "source": "192.0.2.1", "level": "1", "until": "2026-11-30T21:15:00Z"}}
	if len(got.event.ID) != 32 {
		t.Errorf("id %q, want 32 hex digits", got.event.ID)
	}
	gotJSON, _ := json.Marshal(got.event)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("event\n got %s\nwant %s", gotJSON, wantJSON)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(got.body, &fields); err != nil || len(fields) != 4 {
		t.Errorf("body %s: want exactly id, type, time, data", got.body)
	}
	if n := s.metric(t, "xcloak_webhook_deliveries_total", "succeeded"); n != 1 {
		t.Errorf("succeeded = %v, want 1", n)
	}
}

func TestEventsOfInterest(t *testing.T) {
	for kind, want := range map[string]string{
		auth.EventLockout:      "lockout.started",
		auth.EventLockoutEnded: "lockout.ended",
		auth.EventUnlock:       "account.unlocked",
		// The owner's unlock link lets in their browser, as a known
		// device; the account stays locked until its time runs out, and
		// lockout.ended says when: an account.unlocked would be false and
		// the second end of one lockout.
		auth.EventUnlockConfirmed:      "",
		auth.EventAttackStarted:        "attack.started",
		auth.EventAttackEnded:          "attack.ended",
		auth.EventVerificationRequired: "signin.held",
		auth.EventUserDisabled:         "user.disabled",
		auth.EventUserDeleted:          "user.deleted",
		auth.EventUserCreated:          "user.created",
		auth.EventAPIKeyCreated:        "apikey.created",
		auth.EventAPIKeyRevoked:        "apikey.revoked",
		auth.EventUserEnabled:          "user.enabled",
		auth.EventUserPromoted:         "user.promoted",
		auth.EventUserDemoted:          "user.demoted",
		auth.EventPasswordSet:          "password.set",
		auth.EventAttackSwitched:       "attack.switched",
		auth.EventLoginFailed:          "",
		auth.EventLoginSucceeded:       "",
		auth.EventResetRequested:       "",
		// The owner's own removal, in this table without "by": see
		// TestFactorRemovedByAnotherIsSent.
		auth.EventFactorRemoved: "",
		auth.EventFactorAdded:   "",
	} {
		ev, ok := webhook.FromAuth(auth.Event{Kind: kind, At: time.Now()})
		if ev.Type != want || ok != (want != "") {
			t.Errorf("FromAuth(%s) = %q, %v; want %q", kind, ev.Type, ok, want)
		}
	}
	a, _ := webhook.FromAuth(lockout("a@example.com"))
	b, _ := webhook.FromAuth(lockout("a@example.com"))
	if a.ID == b.ID {
		t.Error("two events have the same id")
	}
}

// TestFactorRemovedByAnotherIsSent: factors removed by an administrator
// or from the command line are sent, naming who did it and how many; the
// owner's own removal of a factor is not.
func TestFactorRemovedByAnotherIsSent(t *testing.T) {
	for _, tc := range []struct {
		by   string
		sent bool
	}{
		{"", false},
		{"owner", false},
		{"admin:boss@example.com", true},
		{"cli", true},
	} {
		e := auth.Event{Kind: auth.EventFactorRemoved, At: time.Now(), Account: "ann@example.com", UserID: 7}
		if tc.by != "" {
			e.Detail = map[string]string{"by": tc.by, "count": "2"}
		}
		ev, ok := webhook.FromAuth(e)
		if ok != tc.sent {
			t.Errorf("factor_removed by %q: sent %v, want %v", tc.by, ok, tc.sent)
			continue
		}
		if ok && (ev.Type != webhook.TypeFactorRemoved || ev.Data["by"] != tc.by || ev.Data["count"] != "2" ||
			ev.Data["account"] != "ann@example.com" || ev.Data["user_id"] != "7") {
			t.Errorf("factor_removed by %q: %+v, want factor.removed naming ann, 7, by and count", tc.by, ev)
		}
	}
}

func TestRetriesWithBackoffThenDeliversOnceWithTheSameID(t *testing.T) {
	r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n < 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	s := newSender(t, webhook.Config{MinBackoff: time.Second, MaxBackoff: time.Minute}, r.url())
	stop := s.run(t)
	s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	r.wait(3)
	stop()
	got := r.requests()
	if len(got) != 3 {
		t.Fatalf("%d requests, want 3 (two 500s, then the 200)", len(got))
	}
	for _, g := range got[1:] {
		if g.event.ID != got[0].event.ID || string(g.body) != string(got[0].body) {
			t.Errorf("a retry's body %s differs from the first %s", g.body, got[0].body)
		}
	}
	w := s.waits.all()
	if len(w) != 2 || w[0] <= 0 || w[0] > time.Second || w[1] <= 0 || w[1] > 2*time.Second {
		t.Errorf("waits %v, want one in (0, 1s] then one in (0, 2s]", w)
	}
	if n := s.metric(t, "xcloak_webhook_deliveries_total", "succeeded"); n != 1 {
		t.Errorf("succeeded = %v, want 1", n)
	}
	if n := s.metric(t, "xcloak_webhook_deliveries_total", "failed"); n != 0 {
		t.Errorf("failed = %v, want 0", n)
	}
}

func TestBackoffGrowsToItsCeiling(t *testing.T) {
	r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) { w.WriteHeader(http.StatusBadGateway) })
	s := newSender(t, webhook.Config{Attempts: 8, MinBackoff: time.Second, MaxBackoff: 4 * time.Second}, r.url())
	stop := s.run(t)
	s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	r.wait(8)
	stop()
	if n := len(r.requests()); n != 8 {
		t.Errorf("%d requests, want the 8 attempts", n)
	}
	for i, w := range s.waits.all() {
		ceil := min(time.Second<<i, 4*time.Second)
		if w <= 0 || w > ceil {
			t.Errorf("wait %d = %v, want in (0, %v]", i+1, w, ceil)
		}
	}
	if n := len(s.waits.all()); n != 7 {
		t.Errorf("%d waits, want 7", n)
	}
	if n := s.metric(t, "xcloak_webhook_deliveries_total", "failed"); n != 1 {
		t.Errorf("failed = %v, want 1", n)
	}
}

func TestRetryAfterIsHonouredWithinBounds(t *testing.T) {
	for _, tc := range []struct {
		retryAfter string
		want       time.Duration
	}{
		{"7", 7 * time.Second},
		{"3600", 30 * time.Second}, // MaxBackoff
		// Past what a Duration holds: still "a long time", never a
		// wrapped-around short wait.
		{"9999999999", 30 * time.Second},
		{"18446744074", 30 * time.Second},
		{"99999999999999999999", 30 * time.Second},
	} {
		t.Run(tc.retryAfter, func(t *testing.T) {
			r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				if n == 0 {
					w.Header().Set("Retry-After", tc.retryAfter)
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				w.WriteHeader(http.StatusAccepted)
			})
			s := newSender(t, webhook.Config{MaxBackoff: 30 * time.Second}, r.url())
			stop := s.run(t)
			s.EventsWritten([]auth.Event{lockout("ann@example.com")})
			r.wait(2)
			stop()
			if w := s.waits.all(); len(w) != 1 || w[0] != tc.want {
				t.Errorf("waits %v, want [%v]", w, tc.want)
			}
		})
	}
}

func TestNoRetryOnOtherAnswers(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			elsewhere := newReceiver(t, nil)
			r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				w.Header().Set("Location", elsewhere.srv.URL)
				w.WriteHeader(status)
			})
			s := newSender(t, webhook.Config{}, r.url())
			stop := s.run(t)
			s.EventsWritten([]auth.Event{lockout("ann@example.com")})
			r.wait(1)
			stop()
			if n := len(r.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			if n := len(elsewhere.requests()); n != 0 {
				t.Errorf("a redirect was followed: %d requests elsewhere", n)
			}
			if n := s.metric(t, "xcloak_webhook_deliveries_total", "failed"); n != 1 {
				t.Errorf("failed = %v, want 1", n)
			}
		})
	}
}

// TestRedirectToNoURLIsRefused: a redirect whose Location is no URL is
// refused as any other is, not taken for a network error and sent again.
func TestRedirectToNoURLIsRefused(t *testing.T) {
	r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		w.Header().Set("Location", "http://[::1%zz/")
		w.WriteHeader(http.StatusFound)
	})
	s := newSender(t, webhook.Config{Attempts: 3}, r.url())
	stop := s.run(t)
	s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	for s.metric(t, "xcloak_webhook_deliveries_total", "failed") == 0 {
		time.Sleep(time.Millisecond)
	}
	stop()
	if n := len(r.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if w := s.waits.all(); len(w) != 0 {
		t.Errorf("waited %v before retries, want none", w)
	}
}

// TestRetriesOnNetworkErrors: a receiver that is not there is tried
// Attempts times.
func TestRetriesOnNetworkErrors(t *testing.T) {
	r := newReceiver(t, nil)
	u := r.url()
	r.srv.Close() // nothing listens there any more
	s := newSender(t, webhook.Config{Attempts: 3}, u)
	stop := s.run(t)
	s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	for s.metric(t, "xcloak_webhook_deliveries_total", "failed") == 0 {
		time.Sleep(time.Millisecond)
	}
	stop()
	if n := len(s.waits.all()); n != 2 {
		t.Errorf("%d waits, want 2 (3 attempts)", n)
	}
}

// TestUpgradeAnswerEndsWithinTheAttemptTime: a receiver that answers 101
// Switching Protocols, which hands the client the bare connection, and
// then says nothing, still costs an attempt no more than Config.Timeout,
// and Run returns within Config.Flush of shutdown.
func TestUpgradeAnswerEndsWithinTheAttemptTime(t *testing.T) {
	upgrade := testenv.SilentUpgrade(t)
	r := newReceiver(t, func(w http.ResponseWriter, req *http.Request, n int) { upgrade(w, req) })
	// An attempt time of 2 s, not less: the one attempt must reach the
	// receiver before its time is up, and on a loaded machine a
	// connection and a request can take hundreds of milliseconds.
	s := newSender(t, webhook.Config{Attempts: 1, Workers: 1, Timeout: 2 * time.Second, Flush: 100 * time.Millisecond}, r.url())
	stop := s.run(t)
	s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	r.wait(1)
	// A stuck attempt never ends: thirty seconds tells it from bounds of
	// 2 s that a loaded machine kept late.
	deadline := time.Now().Add(30 * time.Second)
	for s.metric(t, "xcloak_webhook_deliveries_total", "failed") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.metric(t, "xcloak_webhook_deliveries_total", "failed"); n != 1 {
		t.Errorf("30s after a 101 with a 2s attempt time: %v failed, want 1: the attempt still reads the answer", n)
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Error("Run has not returned 30s after shutdown began, with a 100ms flush: a worker is stuck on the receiver")
	}
}

// TestFullQueueDropsWithoutBlocking: with the receiver hanging, sending
// never blocks; the URL's queue holds Queue deliveries and the rest are
// dropped and counted, in the metrics and in the shared counter.
func TestFullQueueDropsWithoutBlocking(t *testing.T) {
	r := hanging(t)
	s := newSender(t, webhook.Config{Queue: 3, Workers: 1, Flush: time.Millisecond}, r.url())
	// Not running yet: nothing leaves the queue.
	for range 10 {
		s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	}
	if n := s.metric(t, "xcloak_webhook_dropped_total", webhook.DropQueueFull); n != 7 {
		t.Errorf("dropped queue_full = %v, want 7", n)
	}
	if n := s.metric(t, "xcloak_webhook_queued", ""); n != 3 {
		t.Errorf("queued = %v, want 3", n)
	}
	stop := s.run(t)
	r.wait(1) // the worker is stuck on the first
	stop()    // the flush runs out: the one under way and the two queued are dropped
	if n := s.metric(t, "xcloak_webhook_dropped_total", webhook.DropShutdown); n != 3 {
		t.Errorf("dropped shutdown = %v, want 3", n)
	}
	if n := s.drops.n.Load(); n != 10 {
		t.Errorf("shared counter = %d, want 10", n)
	}
	if n := len(r.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestFloodOfLockoutsKeepsNoOtherEventOut: lockouts, which anyone can
// cause for any account (an application's key, for the names it likes),
// fill their own queue; the events only administrators and the detector
// make, an account deleted or attack mode, are not dropped by them.
// (That they are not delayed by them is
// TestLockoutsUnderWayHoldNoOtherEventBack.)
func TestFloodOfLockoutsKeepsNoOtherEventOut(t *testing.T) {
	r := newReceiver(t, nil)
	s := newSender(t, webhook.Config{Queue: 3, Workers: 1}, r.url())
	// Not running yet: nothing leaves the queues.
	for range 10 {
		s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	}
	s.Send(webhook.Event{ID: "deleted", Type: webhook.TypeUserDeleted, Time: "2026-11-30T21:00:00Z",
		Data: map[string]string{"account": "bob@example.com", "by": "admin:root@example.com"}})
	if n := s.metric(t, "xcloak_webhook_dropped_total", webhook.DropQueueFull); n != 7 {
		t.Errorf("dropped queue_full = %v, want the 7 lockouts past the queue", n)
	}
	stop := s.run(t)
	// A bound on deliveries that never come; a loaded machine may take
	// seconds over the four.
	for deadline := time.Now().Add(time.Minute); len(r.requests()) < 4 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	var types []string
	for _, g := range r.requests() {
		types = append(types, g.event.Type)
	}
	slices.Sort(types)
	if want := []string{"lockout.started", "lockout.started", "lockout.started", "user.deleted"}; !slices.Equal(types, want) {
		t.Errorf("sent %v, want user.deleted and the 3 lockouts queued", types)
	}
}

// TestLockoutsUnderWayHoldNoOtherEventBack: with every worker held by a
// lockout's delivery (a receiver slow to answer them, or their retries),
// an account deleted is still sent at once, by the worker of its own.
func TestLockoutsUnderWayHoldNoOtherEventBack(t *testing.T) {
	release := make(chan struct{})
	r := newReceiver(t, func(w http.ResponseWriter, req *http.Request, n int) {
		if n < 2 { // the two lockouts: held until the test ends
			select {
			case <-release:
			case <-req.Context().Done():
			}
		}
	})
	t.Cleanup(func() { close(release) })
	s := newSender(t, webhook.Config{Workers: 2}, r.url())
	s.run(t)
	s.EventsWritten([]auth.Event{lockout("a@example.com"), lockout("b@example.com")})
	r.wait(2) // both workers are held
	s.Send(webhook.Event{ID: "deleted", Type: webhook.TypeUserDeleted, Time: "2026-11-30T21:00:00Z",
		Data: map[string]string{"account": "bob@example.com", "by": "admin:root@example.com"}})
	select {
	case <-r.came:
	case <-time.After(30 * time.Second): // the lockouts are held until the test ends: a bound on a hang
		t.Fatal("user.deleted not sent while both workers were held by lockouts")
	}
	if got := r.requests(); len(got) != 3 || got[2].event.Type != webhook.TypeUserDeleted {
		t.Errorf("third request %+v, want user.deleted", got[len(got)-1].event)
	}
}

// TestShutdownFlushesWhatIsQueued: a live receiver gets what was queued
// when shutdown began.
func TestShutdownFlushesWhatIsQueued(t *testing.T) {
	r := newReceiver(t, nil)
	// A flush of a minute, not the default's 10 s, which twenty
	// deliveries one after another may outlast on a loaded machine.
	s := newSender(t, webhook.Config{Queue: 50, Workers: 1, Flush: time.Minute}, r.url())
	for range 20 {
		s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // shutdown began before the first delivery
	s.Run(ctx)
	if n := len(r.requests()); n != 20 {
		t.Errorf("%d delivered, want 20", n)
	}
	if n := s.metric(t, "xcloak_webhook_dropped_total", webhook.DropShutdown); n != 0 {
		t.Errorf("dropped = %v, want 0", n)
	}
}

// TestDeadReceiverDoesNotStarveALiveOne: with one of two URLs hanging,
// the other gets every event, one after another, while the dead one's
// queue fills and drops.
func TestDeadReceiverDoesNotStarveALiveOne(t *testing.T) {
	dead := hanging(t)
	live := newReceiver(t, nil)
	s := newSender(t, webhook.Config{Queue: 5, Workers: 2, Flush: time.Millisecond}, dead.url(), live.url())
	stop := s.run(t)
	const events = 50
	for i := range events {
		s.EventsWritten([]auth.Event{lockout("ann@example.com")})
		live.wait(1)
		if i == events-1 {
			break
		}
	}
	got := live.requests()
	if len(got) != events {
		t.Errorf("the live receiver got %d, want %d", len(got), events)
	}
	// The dead one holds 2 under way and 5 queued; the rest are dropped.
	if n := s.metric(t, "xcloak_webhook_dropped_total", webhook.DropQueueFull); n < events-7 {
		t.Errorf("dropped queue_full = %v, want at least %d", n, events-7)
	}
	stop()
}

// TestSecretPerReceiver: with a secret per URL, each receiver's deliveries
// are signed with its own, and no other verifies them: a receiver (a
// relay run by someone else) cannot sign an event another would take.
func TestSecretPerReceiver(t *testing.T) {
	a, b := newReceiver(t, nil), newReceiver(t, nil)
	secrets := [][]byte{[]byte("receiver-a-secret-0123456789abcdefgh"), []byte("receiver-b-secret-0123456789abcdefgh")}
	s := newSender(t, webhook.Config{Secrets: secrets}, a.url(), b.url())
	stop := s.run(t)
	s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	a.wait(1)
	b.wait(1)
	stop()
	for i, r := range []*receiver{a, b} {
		got := r.requests()[0]
		if err := webhook.Verify(secrets[i], got.signature, got.body, time.Now()); err != nil {
			t.Errorf("receiver %d, its own secret: %v", i, err)
		}
		for _, other := range [][]byte{secrets[1-i], secret} {
			if err := webhook.Verify(other, got.signature, got.body, time.Now()); err == nil {
				t.Errorf("receiver %d's delivery verifies with %q", i, other)
			}
		}
	}
}

func TestNewRefuses(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		cfg  webhook.Config
	}{
		{"no URL", webhook.Config{Secret: secret}},
		{"short secret", webhook.Config{URLs: []*url.URL{u("https://h.example/x")}, Secret: []byte("short")}},
		{"no scheme", webhook.Config{URLs: []*url.URL{u("h.example/x")}, Secret: secret}},
		{"ftp", webhook.Config{URLs: []*url.URL{u("ftp://h.example/x")}, Secret: secret}},
		{"no host", webhook.Config{URLs: []*url.URL{u("https:///x")}, Secret: secret}},
		{"user info", webhook.Config{URLs: []*url.URL{u("https://u:p@h.example/x")}, Secret: secret}},
		{"port out of range", webhook.Config{URLs: []*url.URL{u("https://h.example:99999/x")}, Secret: secret}},
		{"fewer secrets than URLs", webhook.Config{URLs: []*url.URL{u("https://a.example/x"), u("https://b.example/x")}, Secrets: [][]byte{secret}}},
		{"a short secret of one URL", webhook.Config{URLs: []*url.URL{u("https://a.example/x"), u("https://b.example/x")}, Secrets: [][]byte{secret, []byte("short")}}},
	} {
		if _, err := webhook.New(tc.cfg, webhook.Deps{}); err == nil {
			t.Errorf("%s: New accepted it", tc.name)
		}
	}
}

// TestGivenUpCountsAsNotSent: the dashboard's "Webhooks not sent" reads
// the shared counter; a receiver that is dead (every retry fails) or
// refuses every delivery, yet keeps up with the queue, must show there
// too, not only in the metrics.
func TestGivenUpCountsAsNotSent(t *testing.T) {
	refusing := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusUnauthorized)
	})
	dead := newReceiver(t, nil)
	deadURL := dead.url()
	dead.srv.Close()
	s := newSender(t, webhook.Config{Attempts: 2}, refusing.url(), deadURL)
	stop := s.run(t)
	s.EventsWritten([]auth.Event{lockout("ann@example.com"), lockout("bob@example.com")})
	for s.metric(t, "xcloak_webhook_deliveries_total", "failed") < 4 {
		time.Sleep(time.Millisecond)
	}
	stop()
	if n := s.drops.n.Load(); n != 4 {
		t.Errorf("shared counter = %d, want 4 (2 refused, 2 given up)", n)
	}
	if n := s.metric(t, "xcloak_webhook_dropped_total", webhook.DropQueueFull) + s.metric(t, "xcloak_webhook_dropped_total", webhook.DropShutdown); n != 0 {
		t.Errorf("dropped_total = %v, want 0: they were tried", n)
	}
}

// TestAnswerHeadersBounded: a receiver's answer is read within
// maxAnswerHeaderBytes of headers, as its body is within 4 KiB: one that
// answers a megabyte of them has its delivery fail, rather than every
// attempt of every worker reading up to net/http's 10 MB default.
func TestAnswerHeadersBounded(t *testing.T) {
	r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("X-Padding", strings.Repeat("p", 1<<20))
		w.WriteHeader(http.StatusNoContent)
	})
	s := newSender(t, webhook.Config{Attempts: 1, Workers: 1}, r.url())
	stop := s.run(t)
	defer stop()
	s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	r.wait(1)
	for s.metric(t, "xcloak_webhook_deliveries_total", "failed")+s.metric(t, "xcloak_webhook_deliveries_total", "succeeded") == 0 {
		time.Sleep(time.Millisecond)
	}
	if n := s.metric(t, "xcloak_webhook_deliveries_total", "succeeded"); n != 0 {
		t.Errorf("an answer with a megabyte of headers taken: %v succeeded, want it failed", n)
	}
}

// TestFloodOfLockoutsKeepsAdministratorsLocksAndUnlocks: a lock or an
// unlock an administrator or the command line made is theirs, as an
// account disabled is: a flood of lockouts, or of the unlocks that
// resets make, fills its own queue and drops neither.
func TestFloodOfLockoutsKeepsAdministratorsLocksAndUnlocks(t *testing.T) {
	r := newReceiver(t, nil)
	s := newSender(t, webhook.Config{Queue: 3, Workers: 1}, r.url())
	// Not running yet: nothing leaves the queues.
	for range 10 {
		s.EventsWritten([]auth.Event{lockout("ann@example.com")})
	}
	at := time.Date(2026, 11, 30, 21, 0, 0, 0, time.UTC)
	s.EventsWritten([]auth.Event{
		{At: at, Kind: auth.EventUnlock, Account: "bob@example.com", Detail: map[string]string{"by": "reset"}},
		{At: at, Kind: auth.EventUnlock, Account: "bob@example.com", Detail: map[string]string{"by": "admin:root@example.com"}},
		{At: at, Kind: auth.EventLockout, Account: "cat@example.com", Detail: map[string]string{"by": "admin:root@example.com", "until": "2026-11-30T22:00:00Z"}},
		{At: at, Kind: auth.EventUnlock, Account: "dan@example.com", Detail: map[string]string{"by": "cli"}},
	})
	if n := s.metric(t, "xcloak_webhook_dropped_total", webhook.DropQueueFull); n != 8 {
		t.Errorf("dropped queue_full = %v, want the 7 lockouts past the queue and the reset's unlock", n)
	}
	stop := s.run(t)
	for deadline := time.Now().Add(time.Minute); len(r.requests()) < 6 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	var sent []string
	for _, g := range r.requests() {
		sent = append(sent, g.event.Type+" "+g.event.Data["account"]+" "+g.event.Data["by"])
	}
	slices.Sort(sent)
	want := []string{
		"account.unlocked bob@example.com admin:root@example.com", "account.unlocked dan@example.com cli",
		"lockout.started ann@example.com ", "lockout.started ann@example.com ", "lockout.started ann@example.com ",
		"lockout.started cat@example.com admin:root@example.com",
	}
	if !slices.Equal(sent, want) {
		t.Errorf("sent %q, want %q", sent, want)
	}
}
