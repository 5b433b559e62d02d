package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/app"
	"github.com/xcloak/xcloak/migrations"
	"github.com/xcloak/xcloak/ratelimit"
	"github.com/xcloak/xcloak/smtpmail"
)

const (
	// probePoolSize is the connections the failover's probes ping through.
	probePoolSize = 2
	// startupTimeout bounds each check of a backing service at start.
	startupTimeout = 10 * time.Second
	// hashWait is how long a sign-in waits for a free hashing slot before
	// it is answered "busy".
	hashWait = 2 * time.Second
)

// backend is the auth service with the stores behind it. serve and the
// user and apikey commands build it the same way; only serve starts its
// background work (start).
type backend struct {
	svc    *auth.Service
	rdb    redis.UniversalClient
	probe  redis.UniversalClient // the failover's pings, on a pool of their own; nil for a command
	pool   *pgxpool.Pool
	hasher *auth.Hasher
	log    *slog.Logger

	stop      context.CancelFunc // ends svc.Run; nil until start
	stopped   chan struct{}      // closed when svc.Run has returned
	closeOnce sync.Once

	// dashboard reads what the security dashboard shows.
	dashboard *dashboard.Reader
	// ready reports whether Redis and Postgres answer, for /readyz
	// (app.App.Ready).
	ready func(ctx context.Context) map[string]error
}

// openBackend connects to Redis, creates and migrates the database,
// opens a connection pool and builds the auth service, without starting
// its background work: serve calls start, a command that acts once does
// not. cfg.Auth must have its Secret and PublicURL set. Close releases it
// all.
//
// serve passes server: a Redis that does not answer at start does not
// stop it (the service starts in degraded mode, follows the failure
// policy, and the shared limits take over once Redis answers), and the
// failover's probes get a pool of their own. The user and apikey commands
// need Redis, to end lockouts, and fail without it.
func openBackend(ctx context.Context, cfg config, logger *slog.Logger, metrics prometheus.Registerer, server bool) (_ *backend, err error) {
	var rdb redis.UniversalClient
	var label string
	var redisDown error
	if server {
		if rdb, label, err = newRedisClient(cfg.RedisURL, cfg.RedisCluster, 0); err == nil {
			if redisDown = pingRedis(ctx, rdb, label); redisDown == nil {
				err = checkRedisVersion(ctx, rdb, label)
			}
		}
	} else {
		rdb, label, err = connectRedis(ctx, cfg.RedisURL, cfg.RedisCluster)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = rdb.Close()
		}
	}()
	if redisDown == nil {
		logger.Info("redis ready", "redis", label)
	}
	// A server's failover probes ping through a client of their own: a
	// flood that keeps every connection of rdb busy must not make Redis
	// look gone.
	var probe redis.UniversalClient
	if server {
		if probe, _, err = newRedisClient(cfg.RedisURL, cfg.RedisCluster, probePoolSize); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				_ = probe.Close()
			}
		}()
	}

	version, err := prepareDatabase(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	logger.Info("database ready", "database", mustDatabaseLabel(cfg.DatabaseURL), "schema_version", version)
	if known := migrations.Latest(); version > known {
		// Expected while a rolling update replaces the replicas; after
		// one rolled back, a sign that this build is older than its schema.
		logger.Warn("the database's schema is newer than this build's: a newer XCloak migrated it; "+
			"this build runs on it, as the replicas not yet replaced do during a rolling update",
			"schema_version", version, "build_schema_version", known)
	}
	pc, err := poolConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("XCLOAK_DATABASE_URL: %w", databaseURLError(cfg.DatabaseURL, err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", mustDatabaseLabel(cfg.DatabaseURL), err)
	}
	defer func() {
		if err != nil {
			pool.Close()
		}
	}()

	hasher, err := auth.NewHasher(auth.DefaultParams, cfg.HashConcurrency, hashWait)
	if err != nil {
		return nil, err
	}
	var mailer auth.Mailer = auth.LogMailer{Logger: logger}
	if !server {
		mailer = unsentMail{log: logger}
	} else if cfg.SMTPURL != "" {
		smtp, err := smtpmail.New(cfg.SMTPURL)
		if err != nil {
			return nil, fmt.Errorf("XCLOAK_SMTP_URL: %w", err)
		}
		logger.Info("mail ready", "smtp", smtp.Config())
		if smtp.Config().InClearOverNetwork() {
			logger.Warn("XCLOAK_SMTP_URL has tls=" + smtp.Config().Security.String() + " to a host that is not this machine: every mail, " +
				"reset and sign-in links included, crosses the network in clear (or may: anyone on the path can strip an " +
				"opportunistic STARTTLS); use tls=starttls or smtps:// unless the network is yours alone")
		}
		mailer = smtp
	}
	checker, err := breached.Open(cfg.BreachedPasswords, cfg.BreachedTimeout, nil)
	if err != nil {
		return nil, fmt.Errorf("XCLOAK_BREACHED_PASSWORDS: %w", err)
	}
	if checker != nil {
		logger.Info("breached passwords checked", "timeout_seconds", cfg.BreachedTimeout.Seconds())
		if breachedInClear(cfg.BreachedPasswords) {
			logger.Warn("XCLOAK_BREACHED_PASSWORDS is a range API in plain http to a host that is not this machine: " +
				"anyone on the network between can answer ranges without the breached passwords, so that none is refused, " +
				"or fail every lookup, so that every sign-in from a new browser is held; use https unless the network is yours alone")
		}
	}
	hook, err := newWebhooks(cfg, logger, metrics, rdb)
	if err != nil {
		return nil, err
	}
	xc, err := app.New(cfg.Auth, app.Deps{
		Postgres:   pool,
		Redis:      rdb,
		ProbeRedis: probe,
		KeyPrefix:  cfg.KeyPrefix,
		Hasher:     hasher,
		Mailer:     mailer,
		Logger:     logger,
		Metrics:    metrics,
		Breached:   checker,
		Attack:     cfg.Attack,
		Hook:       hook,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			xc.Limiter.Close() // ends its watch of Redis restarts
		}
	}()
	svc := xc.Service
	if server {
		// A command never reads a factor's secret (XCLOAK_MFA_KEY is
		// serve's alone), and is how an administrator removes the
		// factors of a key that is lost: it starts without the check.
		if err := checkMFAKey(ctx, svc, cfg.DatabaseURL); err != nil {
			return nil, err
		}
	}

	if redisDown != nil {
		_ = svc.CheckRedis(ctx) // enters degraded mode now, and probes
		logger.Error("redis does not answer at start: serving in degraded mode; the shared limits take over when it answers",
			"redis", label, "policy", string(svc.FailurePolicy()), "err", redisDown)
	}

	return &backend{svc: svc, dashboard: xc.Dashboard, ready: xc.Ready, rdb: rdb, probe: probe, pool: pool, hasher: hasher, log: logger}, nil
}

// start runs the service's background work, serve's: writing events,
// sending mail, removing expired rows, recording the lockouts that ended
// and watching for attacks. A command that acts once never starts it:
// those are the running servers' to do, by their settings, and a command
// that did them would act with its own (it would end attack mode after
// the default quiet period, delete events after the default retention)
// and claim the ends of lockouts without the webhooks the servers send.
// The work outlives ctx: once ctx ends, requests still in flight record
// events, and Close stops it only after they are done.
func (b *backend) start(ctx context.Context) {
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stop, b.stopped = stop, make(chan struct{})
	go func() {
		defer close(b.stopped)
		b.svc.Run(runCtx)
	}()
}

// Close writes the security events and sends the mails still queued,
// ending the background work if start began it (auth.Service.Drain if
// not), then closes the pool and the Redis clients. Call it once nothing
// uses the service; calls after the first do nothing.
func (b *backend) Close() {
	b.closeOnce.Do(func() {
		if b.stop != nil {
			b.stop()
			<-b.stopped
		} else if err := b.svc.Drain(context.Background()); err != nil {
			b.log.Error("writing security events", "err", err)
		}
		b.pool.Close()
		if err := b.rdb.Close(); err != nil {
			b.log.Warn("closing redis client", "err", err)
		}
		if b.probe != nil {
			_ = b.probe.Close()
		}
	})
}

// checkMFAKey refuses, within startupTimeout, a start whose
// XCLOAK_MFA_KEY does not open the authenticator-app secrets sealed in the
// database: without it every owner of one would be refused at the second
// step, by a server that reports itself healthy. The errors name the
// setting, never the key nor a secret.
func checkMFAKey(ctx context.Context, svc *auth.Service, databaseURL string) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	const consequence = ": the second step would refuse every code of those apps; " +
		"set the key they were sealed with (docs/DEPLOY.md says what to do if it is lost)"
	switch err := svc.CheckMFAKey(ctx); {
	case errors.Is(err, auth.ErrMFAKeyMissing):
		return errors.New("XCLOAK_MFA_KEY is not set (nor XCLOAK_MFA_KEY_FILE), " +
			"and the database holds authenticator-app secrets sealed with it" + consequence)
	case errors.Is(err, auth.ErrMFAKeyWrong):
		return errors.New("XCLOAK_MFA_KEY is not the key the database's authenticator-app secrets were sealed with" + consequence)
	case err != nil:
		return fmt.Errorf("database %s: reading a sealed second factor: %w", mustDatabaseLabel(databaseURL), err)
	}
	return nil
}

// connectRedis opens a client for rawURL (newRedisClient) and checks that
// Redis answers.
func connectRedis(ctx context.Context, rawURL string, cluster bool) (redis.UniversalClient, string, error) {
	rdb, label, err := newRedisClient(rawURL, cluster, 0)
	if err != nil {
		return nil, "", err
	}
	if err := pingRedis(ctx, rdb, label); err != nil {
		_ = rdb.Close()
		return nil, "", err
	}
	if err := checkRedisVersion(ctx, rdb, label); err != nil {
		_ = rdb.Close()
		return nil, "", err
	}
	return rdb, label, nil
}

// pingRedis checks, within startupTimeout, that Redis answers.
func pingRedis(ctx context.Context, rdb redis.UniversalClient, label string) error {
	pingCtx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		return fmt.Errorf("redis at %s does not answer: %w", label, err)
	}
	return nil
}

// checkRedisVersion refuses, within startupTimeout, a Redis too old for
// the limits' scripts: better not to start than to fail each lockout.
func checkRedisVersion(ctx context.Context, rdb redis.UniversalClient, label string) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	if err := ratelimit.CheckVersion(ctx, rdb); err != nil {
		return fmt.Errorf("redis at %s: %w", label, err)
	}
	return nil
}

// newRedisClient opens a client for rawURL without talking to Redis yet.
// Timeouts and the pool size suit a service whose every request makes one
// or two short round trips. A command honours its context's deadline, and
// a failed one is not retried: a limit decision must come within its bound
// (XCLOAK_REDIS_TIMEOUT), and one that Redis cannot give is the failure
// policy's to take, not worth more tries against a dead server (go-redis
// would otherwise try each command four times, and each connection five).
// MaxRetries does not bind go-redis' cluster client, which sends a command
// again after a read timeout, a dropped connection or EOF, up to
// MaxRedirects times: a command that must not run twice (the limits' and
// lockouts' scripts, attack mode's, the counters' writes) is made with
// internal/redisonce, whose commands that client never sends again once
// they may have reached Redis (MOVED and ASK are still followed).
// Every option of the URL is kept (redisOptions), and its dial_timeout,
// read_timeout, write_timeout, pool_size, pool_timeout and max_retries win
// over these defaults.
// It returns a Redis Cluster client when the URL lists several addresses
// or cluster is set, a Sentinel client when the URL names a master_name,
// and a plain client otherwise (see redisOptions).
//
// poolSize, when above zero, is the pool's size (per node of a cluster)
// unless the URL sets pool_size.
func newRedisClient(rawURL string, cluster bool, poolSize int) (redis.UniversalClient, string, error) {
	opts, err := redisOptions(rawURL, cluster)
	if err != nil {
		return nil, "", fmt.Errorf("redis URL: %w", err)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = time.Second
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = time.Second
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = poolSize
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = max(32, 10*runtime.GOMAXPROCS(0))
	}
	if opts.PoolTimeout == 0 {
		// The caller's context bounds the wait for a connection (for a
		// limit decision, XCLOAK_REDIS_TIMEOUT); go-redis' own default,
		// the read timeout plus a second, would cut a burst shorter.
		opts.PoolTimeout = time.Minute
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1 // go-redis: 0 means its default of 3 retries
	}
	opts.DialerRetries = 1 // and 0 its default of 5 dials per connection
	opts.ContextTimeoutEnabled = true
	return redis.NewUniversalClient(opts), universalLabel(opts), nil
}

// prepareDatabase creates the database when missing and brings its schema up
// to date, returning the schema version.
func prepareDatabase(ctx context.Context, databaseURL string) (int64, error) {
	label := mustDatabaseLabel(databaseURL)
	if err := migrations.EnsureDatabase(ctx, databaseURL); err != nil {
		return 0, fmt.Errorf("database %s: %w", label, err)
	}
	version, err := migrations.Up(ctx, databaseURL)
	if err != nil {
		return 0, fmt.Errorf("database %s: %w", label, err)
	}
	return version, nil
}

// mustDatabaseLabel is databaseLabel for a URL that loadConfig already checked.
func mustDatabaseLabel(databaseURL string) string {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return "(invalid database URL)"
	}
	return databaseLabel(cfg)
}

// unsentMail is the mail of a command that acts once (user, apikey):
// the command line has no SMTP server and no public URL of its own, and
// a mail written to a terminal would put its link, a live credential,
// there. What a command would have mailed is named, never shown.
type unsentMail struct{ log *slog.Logger }

func (m unsentMail) Send(ctx context.Context, msg auth.Message) error {
	m.log.WarnContext(ctx, "the command line sends no mail: not sent", "to", msg.To, "subject", msg.Subject)
	return nil
}

// breachedInClear reports whether source, XCLOAK_BREACHED_PASSWORDS, is a
// range API reached in plain http on a host other than this machine,
// whose answers anyone on the path can rewrite.
func breachedInClear(source string) bool {
	if !strings.HasPrefix(source, "http://") {
		return false
	}
	u, err := url.Parse(source)
	return err == nil && !isLoopback(u.Hostname())
}
