package app

import (
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/counters"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/postgres"
	"github.com/xcloak/xcloak/ratelimit"
)

// Deps are the open connections and collaborators XCloak runs on.
type Deps struct {
	// Postgres is the pool of a migrated database.
	Postgres *pgxpool.Pool
	// Redis holds the shared limits and the dashboard's counters.
	Redis redis.UniversalClient
	// ProbeRedis, if set, is a client of the same Redis with a small pool
	// of its own, which the checks of whether Redis is there ping through.
	ProbeRedis redis.UniversalClient
	// KeyPrefix is the namespace of every Redis key, e.g. "xcloak:".
	KeyPrefix string
	Mailer    auth.Mailer
	Hasher    *auth.Hasher
	// Logger is where the service logs; nil: nowhere.
	Logger *slog.Logger
	// Metrics is where the service registers its Prometheus metrics; nil:
	// a registry of its own that nobody reads.
	Metrics prometheus.Registerer
	// Now is the clock of the service's timestamps and of the dashboard; nil:
	// time.Now.
	Now func() time.Time

	// Breached looks passwords up in a breach corpus (package breached);
	// nil: no checking.
	Breached auth.BreachedChecker
	// Attack is when attack mode is entered and left; the zero Config
	// means attack.DefaultConfig.
	Attack attack.Config
	// Hook hears every security-event row once written, the attack
	// watch's too (package webhook); the service runs it. nil: none.
	Hook auth.EventHook
}

// App is XCloak assembled: the service and what the dashboard reads. Its
// background work starts with Service.Run.
type App struct {
	Service   *auth.Service
	Dashboard *dashboard.Reader
	// Store is the Postgres store behind the service and the dashboard.
	Store *postgres.Store
	// Counters are the dashboard's counters in Redis, which the service's
	// events feed.
	Counters *counters.Stats
	// Limiter decides the service's requests by Redis, by the failure
	// policy while Redis is lost.
	Limiter *ratelimit.Failover
	// Attack watches the sign-ins and keeps attack mode; the service runs
	// it.
	Attack *attack.Watch

	// pool is the Postgres that Ready pings.
	pool *pgxpool.Pool
}

// rememberedRejections bounds the full rules one replica remembers.
const rememberedRejections = 100_000

// New builds XCloak with cfg on d's connections.
func New(cfg auth.Config, d Deps) (*App, error) {
	if d.Postgres == nil || d.Redis == nil {
		return nil, errors.New("app: Postgres and Redis are required")
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg := d.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	takeBackFailed, err := takeBackReport(logger, reg)
	if err != nil {
		return nil, err
	}
	limiter, err := newLimiter(cfg, d.Redis, d.ProbeRedis, d.KeyPrefix, d.Logger, takeBackFailed)
	if err != nil {
		return nil, err
	}
	store := postgres.New(d.Postgres)
	counts, err := counters.New(d.Redis, d.KeyPrefix)
	if err != nil {
		return nil, err
	}
	acfg := d.Attack
	if acfg == (attack.Config{}) {
		acfg = attack.DefaultConfig()
	}
	// Attack mode's events are written by the watch, not the service's
	// recorder, so they join the audit stream here.
	attackEvents := auth.HookedEvents(store, d.Hook)
	if cfg.AuditLog {
		attackEvents = auth.AuditedEvents(attackEvents, d.Logger)
	}
	watch, err := attack.New(acfg, attack.Deps{
		Redis: d.Redis, Prefix: d.KeyPrefix, Events: attackEvents, Logger: d.Logger, Metrics: d.Metrics, Now: d.Now,
	})
	if err != nil {
		return nil, err
	}
	svc, err := auth.NewService(cfg, auth.Deps{
		Store:    store,
		Limiter:  limiter,
		Hasher:   d.Hasher,
		Mailer:   d.Mailer,
		Logger:   d.Logger,
		Now:      d.Now,
		Metrics:  d.Metrics,
		Events:   store,
		Counter:  counts,
		Breached: d.Breached,
		Attack:   watch,
		Activity: store,
		Apps:     store,
		Users:    store,
		Hook:     d.Hook,
		Factors:  store,
		Passkeys: store,
	})
	if err != nil {
		return nil, err
	}
	// The browsers that signed in with right passwords before the
	// detector tripped lose their sessions as attack mode starts.
	// Once at once, and once more when the sign-ins decided before every
	// replica knew have written their sessions (auth.SignOutAgainAfter);
	// the service's Run waits for that one as it ends.
	watch.OnStart(svc.AttackStarted)
	if d.ProbeRedis != nil {
		// A server's: a Redis restarted between two requests gets the
		// lockouts in force back too. Once the service has given the
		// limiter where they are recorded (auth.Limiter.Watch).
		limiter.WatchRestarts(restartWatch)
	}
	board := dashboard.New(counts, store, svc, watch, d.Now, d.Logger)
	// The event searches leave most of the pool to the sign-ins.
	board.ShareConnections(int(d.Postgres.Config().MaxConns))
	return &App{
		Service:   svc,
		Dashboard: board,
		Store:     store,
		Counters:  counts,
		Limiter:   limiter,
		Attack:    watch,
		pool:      d.Postgres,
	}, nil
}

// newLimiter builds the limits cfg asks for on rdb: the shared store in
// Redis under prefix, and the in-process one that serves under
// ratelimit.FailLocal, behind cfg.RedisFailure. probe, if set, is a client
// of the same Redis with a small pool of its own that the checks of
// whether Redis is there ping through. The service hands the limiter its
// hooks (auth.Limiter.Watch). takeBackFailed hears the admissions the
// shared store could not take back.
func newLimiter(cfg auth.Config, rdb, probe redis.UniversalClient, prefix string, log *slog.Logger, takeBackFailed func(rule string, err error)) (*ratelimit.Failover, error) {
	policy := cfg.RedisFailure
	if policy == "" {
		policy = ratelimit.FailLocal
	}
	if _, err := ratelimit.ParseFailurePolicy(string(policy)); err != nil {
		return nil, err
	}
	lockouts := cfg.LockoutPolicies()
	shared, err := ratelimit.NewRedisStore(rdb, prefix, lockouts)
	if err != nil {
		return nil, err
	}
	shared.RememberRejections(cfg.RejectionMemory, rememberedRejections)
	shared.OnTakeBackFailure(takeBackFailed)
	local, err := cfg.LocalStore(0)
	if err != nil {
		return nil, err
	}
	f := ratelimit.NewFailover(shared, local, rdb, policy, log)
	if cfg.RedisTimeout > 0 {
		f.SetTimeout(cfg.RedisTimeout)
	}
	f.SetProbeClient(probe)
	// The service records every lock of an account, and ends the record
	// as it unlocks one (auth.Service.lockoutsInForce reads them).
	f.SetLogged(auth.RuleLoginAccount)
	return f, nil
}

// restartWatch is how often a server looks whether its Redis is a new
// server process (ratelimit.Failover.WatchRestarts): the longest a Redis
// restarted between two requests, without its data, goes without the
// lockouts in force.
const restartWatch = time.Second
