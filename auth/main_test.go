package auth_test

import (
	"context"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/counters"
	"github.com/xcloak/xcloak/internal/app"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/smtpmail"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is a Service on its own database, key prefix and mail sink.
type fixture struct {
	svc    *auth.Service
	db     *pgxpool.Pool
	rdb    *redis.Client
	prefix string
	// counters are the dashboard's counters the service writes.
	counters *counters.Stats
	// attack is the service's attack watch.
	attack *attack.Watch
	mail   *testenv.MailSink
	// mailBody waits for the first mail to an address and returns its
	// body, from mail or, on the in-memory service, from its Mailer.
	mailBody func(t *testing.T, to string) string
	cfg      auth.Config

	mu  sync.Mutex
	now time.Time // zero: the real clock
}

// fastParams keep tests quick; the default parameters have their own test.
var fastParams = authtest.FastParams

// newFixture is a Service of its own with its background work running
// until the test ends; configure and deps change its settings and parts.
func newFixture(t *testing.T, configure func(*auth.Config), deps ...func(*app.Deps)) *fixture {
	t.Helper()
	f := buildFixture(t, configure, deps...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// buildFixture is newFixture without the service's background work
// started, for the tests that run it, stop it or drain it themselves.
func buildFixture(t *testing.T, configure func(*auth.Config), deps ...func(*app.Deps)) *fixture {
	t.Helper()
	_, pool := testenv.Schema(t)
	rdb, prefix := testenv.Redis(t)
	sink := testenv.SMTP(t)
	mailer, err := smtpmail.New(sink.URL())
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := auth.NewHasher(fastParams, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg := auth.DefaultConfig()
	cfg.Secret = []byte("0123456789abcdef0123456789abcdef")
	cfg.PublicURL, _ = url.Parse("https://login.example.test/")
	if configure != nil {
		configure(&cfg)
	}
	f := &fixture{db: pool, rdb: rdb, prefix: prefix, mail: sink, cfg: cfg}
	f.mailBody = func(t *testing.T, to string) string { return sink.WaitFor(t, to).Body }
	d := app.Deps{Postgres: pool, Redis: rdb, KeyPrefix: prefix, Hasher: hasher, Mailer: mailer, Now: f.clock,
		Attack: xcloaktest.ManualAttack()}
	for _, set := range deps {
		set(&d)
	}
	xc, err := app.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	f.svc, f.counters, f.attack = xc.Service, xc.Counters, xc.Attack
	return f
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now.IsZero() {
		return time.Now()
	}
	return f.now
}

// advance moves the service's clock (Postgres timestamps: sessions, reset
// tokens) forward; Redis keeps its own clock.
func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now.IsZero() {
		f.now = time.Now()
	}
	f.now = f.now.Add(d)
}

func (f *fixture) addUser(t *testing.T, email, password string, admin bool) auth.User {
	t.Helper()
	u, err := f.svc.CreateUser(t.Context(), email, password, admin, "cli")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// waitResets waits until every reset request queued so far has been
// handled by the mail workers.
func (f *fixture) waitResets(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for auth.ResetsPending(f.svc) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d reset requests still pending after 20 s", auth.ResetsPending(f.svc))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func client(ip string) auth.Client {
	return auth.Client{Addr: netip.MustParseAddr(ip)}
}
