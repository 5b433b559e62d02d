// Package xcloaktest runs a whole XCloak (auth service and HTTP handler)
// for tests, on a fresh Postgres database, its own Redis key prefix and a
// real SMTP sink, all from internal/testenv, assembled by internal/app as
// serve assembles it.
package xcloaktest

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/app"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/smtpmail"
	"github.com/xcloak/xcloak/web"
)

// Env is one running XCloak.
type Env struct {
	Service *auth.Service
	Handler http.Handler
	DB      *pgxpool.Pool
	Redis   *redis.Client
	Prefix  string
	Mail    *testenv.MailSink
	// DatabaseURL names the Env's database, for a second replica or a
	// subprocess.
	DatabaseURL string
	Auth        auth.Config
	Web         web.Config
	// URL is the base URL of the HTTP server once Start has run.
	URL string

	// Dashboard reads the security dashboard's figures and events.
	Dashboard *dashboard.Reader
	// Attack watches the sign-ins and keeps attack mode.
	Attack *attack.Watch
}

// Options adjust an Env before it starts.
type Options struct {
	// Auth adjusts the service's configuration (limits, lockout).
	Auth func(*auth.Config)
	// Web adjusts the HTTP layer's configuration.
	Web func(*web.Config)
	// Attack adjusts when attack mode is entered and left, starting from
	// ManualAttack: pass DetectAttacks for the default detection.
	Attack func(*attack.Config)
	// Hasher replaces the fast test hasher.
	Hasher *auth.Hasher
	// DatabaseURL and Redis, when set, share stores with another Env
	// (a second replica) instead of making new ones.
	DatabaseURL string
	Redis       *redis.Client
	Prefix      string

	// Breached looks passwords up in a breach corpus; nil: no checking.
	Breached auth.BreachedChecker

	// Now is the service's clock; nil: time.Now.
	Now func() time.Time

	// Logger is the service's logger, the audit stream's included, and
	// the HTTP layer's, as serve has one for both; nil: nothing is logged.
	Logger *slog.Logger

	// Hook hears every security-event row once written; nil: none.
	Hook auth.EventHook
}

// secret is the service secret tests use.
var secret = []byte("test-secret-0123456789abcdef-0123456789")

// New builds an Env and runs its background work until the test ends.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	var dbURL string
	var pool *pgxpool.Pool
	if o.DatabaseURL == "" {
		dbURL, pool = testenv.Schema(t)
	} else {
		// A second replica's pool on the first one's database.
		dbURL = o.DatabaseURL
		var err error
		if pool, err = pgxpool.New(context.Background(), dbURL); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
	}
	rdb, prefix := o.Redis, o.Prefix
	if rdb == nil {
		rdb, prefix = testenv.Redis(t)
	}
	sink := testenv.SMTP(t)
	mailer, err := smtpmail.New(sink.URL())
	if err != nil {
		t.Fatal(err)
	}
	hasher := o.Hasher
	if hasher == nil {
		if hasher, err = auth.NewHasher(authtest.FastParams, 4, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	acfg := auth.DefaultConfig()
	acfg.Secret = secret
	acfg.PublicURL, _ = url.Parse("https://login.example.test/")
	// Administrators of a test server need no second factor unless the
	// test says so, as with --dev.
	acfg.MFA.Admins = auth.AdminMFAOptional
	if o.Auth != nil {
		o.Auth(&acfg)
	}
	atk := ManualAttack()
	if o.Attack != nil {
		o.Attack(&atk)
	}
	xc, err := app.New(acfg, app.Deps{Postgres: pool, Redis: rdb, KeyPrefix: prefix, Hasher: hasher, Mailer: mailer,
		Breached: o.Breached, Attack: atk, Now: o.Now, Logger: o.Logger, Hook: o.Hook})
	if err != nil {
		t.Fatal(err)
	}
	svc := xc.Service
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Tests speak plain http to 127.0.0.1, where browsers and cookie jars
	// drop Secure cookies; the secure attributes have their own test.
	wcfg := web.Config{PublicURL: acfg.PublicURL, InsecureCookies: true}
	if o.Web != nil {
		o.Web(&wcfg)
	}
	ready := func(ctx context.Context) map[string]error {
		return map[string]error{"redis": rdb.Ping(ctx).Err(), "postgres": pool.Ping(ctx)}
	}
	return &Env{
		Service: svc, Dashboard: xc.Dashboard, Attack: xc.Attack, Handler: web.NewServer(wcfg, svc, xc.Dashboard, ready, o.Logger),
		DB: pool, Redis: rdb, Prefix: prefix, Mail: sink, DatabaseURL: dbURL, Auth: acfg, Web: wcfg,
	}
}

// Start serves the Env over real TCP on 127.0.0.1 and returns its URL.
func (e *Env) Start(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(e.Handler)
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	return srv.URL
}

// AddUser creates an account, as "xcloak user add" does (by "cli").
func (e *Env) AddUser(t testing.TB, email, password string, admin bool) auth.User {
	t.Helper()
	u, err := e.Service.CreateUser(context.Background(), email, password, admin, "cli")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// AddAPIKey makes a key of the decision API named name, as "xcloak apikey
// add" does (by "cli"), and returns it.
func (e *Env) AddAPIKey(t testing.TB, name string) string {
	t.Helper()
	key, _, err := e.Service.AddAPIKey(context.Background(), name, "cli")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// Replica builds a second XCloak on e's database, Redis and key prefix, as
// another replica of one deployment: o's own stores are ignored.
func (e *Env) Replica(t testing.TB, o Options) *Env {
	t.Helper()
	o.DatabaseURL, o.Redis, o.Prefix = e.DatabaseURL, e.Redis, e.Prefix
	return New(t, o)
}

// Flush writes queued security events now.
func (e *Env) Flush(t testing.TB) {
	t.Helper()
	if err := e.Service.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Client returns an HTTP client whose connections come from the loopback
// address source (any of 127.0.0.0/8), with a cookie jar, that does not
// follow redirects, so tests see every status and cookie.
func Client(t testing.TB, source string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	// Generous timeouts: tests fire bursts of hundreds of requests at
	// once under -race, on machines busy with other work; a stuck server
	// still fails the test, by the test's own deadline at the latest.
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: time.Minute}
	return &http.Client{
		Jar:     jar,
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			DialContext:         dialer.DialContext,
			MaxIdleConnsPerHost: 4,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Backdate makes the sessions and known devices the account has now d
// older, as if its browsers had signed in that long ago: a test's
// returning browser, known from before an attack rather than from
// moments before it (see auth.Service.SignOutNewDevices).
func (e *Env) Backdate(t testing.TB, email string, d time.Duration) {
	t.Helper()
	for _, table := range []string{"sessions", "devices"} {
		if _, err := e.DB.Exec(context.Background(), `UPDATE `+table+` SET created_at = created_at - make_interval(secs => $2)
			WHERE user_id = (SELECT id FROM users WHERE email = $1)`, email, d.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
}

// ManualAttack is a test server's attack detection unless Options.Attack
// says otherwise: the detector's floors out of reach, so that a test that
// attacks the server to see a limit or a lockout never switches attack
// mode on and has its new browsers held. Attack mode still switches from
// the dashboard (Env.Attack.SwitchAttack). Tests of detection pass
// DetectAttacks.
func ManualAttack() attack.Config {
	c := attack.DefaultConfig()
	c.Failures, c.UnknownAccounts = 1<<40, 1<<40
	c.LongFailures, c.LongUnknownAccounts = 1<<40, 1<<40
	return c
}

// DetectAttacks, as Options.Attack, gives a test server the default
// attack detection.
func DetectAttacks(c *attack.Config) { *c = attack.DefaultConfig() }
