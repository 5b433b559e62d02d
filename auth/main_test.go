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

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/counters"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/migrations"
	"github.com/xcloak/xcloak/postgres"
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
	mail     *testenv.MailSink
	cfg      auth.Config

	mu  sync.Mutex
	now time.Time // zero: the real clock
}

// fastParams keep tests quick; the default parameters have their own test.
var fastParams = auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func newFixture(t *testing.T, configure func(*auth.Config), deps ...func(*auth.Deps)) *fixture {
	t.Helper()
	dbURL := testenv.Postgres(t)
	if _, err := migrations.Up(t.Context(), dbURL); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
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
	counts, err := counters.New(rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: pool, rdb: rdb, prefix: prefix, counters: counts, mail: sink, cfg: cfg}
	store := postgres.New(pool, f.clock)
	d := auth.Deps{
		Store: store, Events: store, Counter: f.counters, Redis: rdb, KeyPrefix: prefix, Hasher: hasher, Mailer: mailer,
		Now: f.clock,
	}
	for _, set := range deps {
		set(&d)
	}
	svc, err := auth.NewService(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
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
	u, err := f.svc.CreateUser(t.Context(), email, password, admin)
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
