package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xcloak/xcloak/ratelimit"
)

// Config is the service's behaviour; DefaultConfig gives the documented
// defaults.
type Config struct {
	// Limits are by rule name, one for each rule of the table with a
	// limit of its own (DefaultLimits). A copy of a Config shares the map:
	// clone it (maps.Clone) before changing the copy's.
	Limits  Limits
	Lockout ratelimit.LockoutPolicy
	// Secret keys the device cookies' and the session tokens' MACs, and
	// the other keys derived from it (deriveKey); at least 32 bytes.
	Secret []byte
	// PublicURL is where users reach XCloak; reset links are built from
	// it, never from a request's Host header.
	PublicURL *url.URL
	// SessionTTL is how long a session lasts.
	SessionTTL time.Duration
	// SessionIdle ends a session sooner, once it has gone unused that
	// long (noticed to the minute: see sessionTouchGap); 0 lets an unused
	// session last its SessionTTL.
	SessionIdle time.Duration
	// ResetTTL is how long a reset link works.
	ResetTTL time.Duration
	// DeviceTTL is how long a device cookie is trusted.
	DeviceTTL time.Duration
	// UnlockTTL is how long an unlock link works.
	UnlockTTL time.Duration
	// MaxDevices is how many known devices an account keeps; a new one
	// makes it forget the least recently used.
	MaxDevices int
	// RedisFailure, RedisTimeout and RejectionMemory shape the Limiter
	// built from Redis (internal/app), not the service itself.
	//
	// RedisFailure is what limits do while Redis is unreachable; empty
	// means ratelimit.FailLocal.
	RedisFailure ratelimit.FailurePolicy
	// RedisTimeout is how long a limit decision waits for Redis, the wait
	// for a free connection included; zero means ratelimit.DefaultTimeout.
	RedisTimeout time.Duration
	// RejectionMemory is how long a replica may answer a rule Redis said
	// was full without asking again (ratelimit.Limiter.RememberRejections);
	// zero asks Redis every time.
	RejectionMemory time.Duration
	// EventRetention is how long security events are kept.
	EventRetention time.Duration
	// SprayAccounts is how many distinct accounts one password may fail
	// on within SprayWindow before it is refused for every account (see
	// spraying.go); 1 to ratelimit.MaxRememberedAttempts.
	SprayAccounts int
	SprayWindow   time.Duration

	// NewDeviceVerification says when a sign-in from a browser that is
	// not a known device must be finished from a link mailed to the
	// account (verification.go); "" means VerifyInAttack.
	NewDeviceVerification VerificationMode
	// VerificationTTL is how long such a link works.
	VerificationTTL time.Duration

	// NotifyNewDevice, NotifyLockout and NotifyPasswordChange say whether
	// the owner is mailed of a sign-in from a new device, of a lockout of
	// the account and of a change of its password (notify.go).
	NotifyNewDevice, NotifyLockout, NotifyPasswordChange bool

	// AuditLog writes every security-event row, as it is written, to the
	// service's logger as one line of the audit stream (audit.go).
	AuditLog bool

	// MFA shapes second factors (mfa.go).
	MFA MFAConfig
	// WebAuthn names the passkeys' relying party (passkey.go).
	WebAuthn WebAuthnConfig
}

// DefaultConfig returns the defaults; Secret and PublicURL must still be
// set.
func DefaultConfig() Config {
	return Config{
		Limits:          DefaultLimits(),
		Lockout:         ratelimit.LockoutPolicy{Threshold: 10, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour},
		SessionTTL:      12 * time.Hour,
		SessionIdle:     30 * time.Minute,
		ResetTTL:        30 * time.Minute,
		UnlockTTL:       30 * time.Minute,
		DeviceTTL:       180 * 24 * time.Hour,
		MaxDevices:      10,
		RedisFailure:    ratelimit.FailLocal,
		RedisTimeout:    ratelimit.DefaultTimeout,
		RejectionMemory: time.Second,
		EventRetention:  90 * 24 * time.Hour,
		SprayAccounts:   DefaultSprayAccounts,
		SprayWindow:     DefaultSprayWindow,

		NewDeviceVerification: VerifyInAttack,
		VerificationTTL:       DefaultVerificationTTL,

		NotifyNewDevice:      true,
		NotifyLockout:        true,
		NotifyPasswordChange: true,

		AuditLog: true,

		MFA: DefaultMFAConfig(),
	}
}

// Deps are the service's backing stores and collaborators.
type Deps struct {
	// Store keeps users, sessions, devices, tokens and the lockout log.
	Store Store
	// Limiter decides requests and keeps lockouts; the service closes it
	// when Run returns.
	Limiter Limiter
	Hasher  *Hasher
	Mailer  Mailer
	Logger  *slog.Logger
	// Now is the clock for Postgres timestamps; nil means time.Now.
	Now func() time.Time
	// Metrics is where the service registers its Prometheus metrics; nil
	// means a registry of its own that nobody reads.
	Metrics prometheus.Registerer

	// Events keeps the security events; Counter counts them for the
	// dashboard.
	Events  EventStore
	Counter EventCounter
	// Attack hears every sign-in attempt and says whether the deployment
	// is under attack; nil: never.
	Attack AttackWatch

	// Breached looks passwords up in a breach corpus (breached.go); nil:
	// no checking.
	Breached BreachedChecker

	// Activity lists an account's own events for its owner (activity.go);
	// nil: Service.Activity is ErrUnavailable.
	Activity ActivityLog

	// Apps keeps the decision API's keys and the known devices of the
	// applications' accounts (apikeys.go, decisions.go); nil: the
	// decision API is ErrUnavailable.
	Apps AppStore

	// Users keeps what account administration reads and changes
	// (useradmin.go); nil: those actions are ErrUnavailable.
	Users UserAdminStore

	// Hook hears every security-event row once written (hooks.go); the
	// service runs it. nil: none.
	Hook EventHook
	// Factors keeps second factors and second steps (mfa.go); nil: no
	// account has a factor, and enrolling one is ErrUnavailable.
	Factors FactorStore
	// Passkeys keeps passkeys and their ceremonies (passkey.go); nil, or
	// no Factors: passkeys are ErrUnavailable.
	Passkeys PasskeyStore
}

// Service decides sign-ins and password resets. It knows nothing of HTTP.
type Service struct {
	cfg     Config
	book    ruleBook // the rules, with cfg.Limits
	store   Store
	limits  Limiter // rules and lockouts, by Redis or the failure policy
	hasher  *Hasher
	mailer  Mailer
	log     *slog.Logger
	devices devices
	now     func() time.Time
	events  *recorder
	// activity lists an account's own events (Deps.Activity).
	activity ActivityLog
	resets   chan linkJob
	metrics  *metrics
	// detached are the writes run past their request's answer (detach),
	// in order for each key, which Run, Drain and Flush wait for.
	detached keyedWrites
	// resetsPending counts reset requests queued, waiting for their
	// domain or being handled.
	resetsPending atomic.Int64
	resetDomains  domainSenders

	// deviceCache remembers for a moment which cookies are known devices.
	deviceCache deviceCache
	// sessionCache remembers sessions for a moment for the reverse
	// proxies' questions (sessioncache.go).
	sessionCache sessionCache
	// sessionTokens tag session tokens, and legacySessions knows whether
	// any made before they were tagged may be live (sessiontoken.go).
	sessionTokens  sessionTokens
	legacySessions legacySessions
	// endedSessions remembers the tokens found to name no session
	// (endedsessions.go).
	endedSessions endedSessions

	// attempts fingerprints failed sign-ins for the lockouts.
	attempts attempts
	// sprayKeys key the passwords tried for RuleLoginPassword.
	sprayKeys sprayKeys
	// attack hears every sign-in attempt (attackwatch.go).
	attack AttackWatch

	// breached looks passwords up in a breach corpus (breached.go).
	breached breachedCheck

	// apps keeps the decision API's keys and devices (Deps.Apps);
	// apiKeys is this replica's list of the keys in force.
	apps    AppStore
	apiKeys apiKeyCache
	// users keeps what account administration needs (Deps.Users).
	users UserAdminStore
	// appDeviceCache remembers for a moment which of the applications'
	// device ids are known devices: apart from deviceCache, so that the
	// ids an application's clients choose never crowd out the answers
	// for XCloak's own browsers.
	appDeviceCache deviceCache
	// decisionKeys sign attempt ids and key the applications' devices.
	decisionKeys decisionKeys

	// hook hears the rows written (Deps.Hook); nil: none.
	hook EventHook
	// factors keeps second factors (Deps.Factors).
	factors FactorStore
	// passkeys keeps passkeys (Deps.Passkeys); webauthn is the relying
	// party that checks their ceremonies.
	passkeys PasskeyStore
	webauthn *webauthn.WebAuthn
	// held seals the second steps of held sign-ins (mfa_held.go).
	held heldKeys
	// secondPasses are attack mode's second sign-outs of new browsers
	// still to come (AttackStarted); Run and Drain wait for them.
	secondPasses delayedWork
}

// NewService checks cfg and wires the service. Call Run to start its
// background work, or, for a command that acts once, Drain when done.
func NewService(cfg Config, d Deps) (*Service, error) {
	if len(cfg.Secret) < 32 {
		return nil, errors.New("auth: secret must be at least 32 bytes")
	}
	if cfg.PublicURL == nil || (cfg.PublicURL.Scheme != "http" && cfg.PublicURL.Scheme != "https") || cfg.PublicURL.Host == "" {
		return nil, errors.New("auth: public URL must be an absolute http(s) URL")
	}
	if err := checkRules(rules); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	// A copy, so that a caller changing its map cannot change the limits
	// of a running service.
	cfg.Limits = maps.Clone(cfg.Limits)
	if cfg.SessionTTL <= 0 || cfg.ResetTTL <= 0 || cfg.DeviceTTL <= 0 || cfg.EventRetention <= 0 {
		return nil, errors.New("auth: session, reset, device and event lifetimes must be positive")
	}
	if cfg.UnlockTTL <= 0 {
		return nil, errors.New("auth: unlock link lifetime must be positive")
	}
	if cfg.SessionIdle < 0 {
		return nil, errors.New("auth: session idle time must not be negative")
	}
	if err := checkSpraying(cfg.SprayAccounts, cfg.SprayWindow); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if err := checkVerification(&cfg); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if err := checkMFA(&cfg.MFA); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if cfg.MaxDevices < 1 {
		return nil, errors.New("auth: an account must keep at least one device")
	}
	if d.Store == nil || d.Limiter == nil || d.Hasher == nil || d.Mailer == nil {
		return nil, errors.New("auth: Store, Limiter, Hasher and Mailer are required")
	}
	if d.Events == nil || d.Counter == nil {
		return nil, errors.New("auth: Events and Counter are required")
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	events := d.Events
	events = HookedEvents(events, d.Hook)
	if cfg.AuditLog {
		events = AuditedEvents(events, log)
	}
	now := d.Now
	if now == nil {
		now = time.Now
	}
	s := &Service{
		cfg:           cfg,
		book:          bookOf(cfg.Limits),
		store:         d.Store,
		limits:        d.Limiter,
		hasher:        d.Hasher,
		mailer:        checkedMailer{d.Mailer},
		log:           log,
		devices:       newDevices(cfg.Secret, cfg.DeviceTTL),
		sessionTokens: newSessionTokens(cfg.Secret),
		now:           now,
		events:        newRecorder(events, d.Counter, log, now),
		resets:        make(chan linkJob, resetQueue),
	}
	s.activity = d.Activity
	s.hook = d.Hook
	s.apps = d.Apps
	s.factors = d.Factors
	if d.Passkeys != nil {
		var err error
		switch s.webauthn, err = newWebAuthn(cfg.PublicURL, cfg.WebAuthn); {
		case errors.Is(err, errPasskeysOff):
			// Browsers refuse WebAuthn for an IP address, and over http
			// away from localhost: XCloak still runs there (a first try,
			// a test), without passkeys.
			log.Warn("passkeys are off: browsers offer WebAuthn over https to a domain name, or to localhost, and the public URL is neither", "public_url", cfg.PublicURL.String())
		case err != nil:
			return nil, err
		default:
			s.passkeys = d.Passkeys
		}
	}
	s.users = d.Users
	s.decisionKeys = newDecisionKeys(cfg.Secret)
	s.attack = d.Attack
	if s.attack == nil {
		s.attack = noAttackWatch{}
	}
	s.attempts = newAttempts(cfg.Secret)
	s.sprayKeys = newSprayKeys(cfg.Secret)
	s.held = newHeldKeys(cfg.Secret)
	reg := d.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	var err error
	if s.metrics, err = newMetrics(reg, s); err != nil {
		return nil, fmt.Errorf("auth: registering metrics: %w", err)
	}
	if s.breached, err = newBreachedCheck(d.Breached, reg); err != nil {
		return nil, fmt.Errorf("auth: registering metrics: %w", err)
	}
	s.limits.Watch(s.lockoutsInForce, func(error) { s.metrics.redisErrors.Inc() })
	return s, nil
}

// Run does the service's background work, writing security events,
// sending reset and unlock mail, removing expired rows, recording the
// lockouts whose time ran out and running the attack watch's work (when
// it has any), until ctx is done; then it finishes what is queued and,
// last, ends the hook (Deps.Hook), which then flushes what it holds.
func (s *Service) Run(ctx context.Context) {
	// The recorder stops last: the mails sent while the queue drains,
	// and the last rounds of the other work, record events too, which a
	// recorder stopped with ctx would leave queued and never write.
	eventsCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.events.Run(eventsCtx)
	}()
	janitor := make(chan struct{})
	go func() {
		defer close(janitor)
		s.runJanitor(ctx)
	}()
	ending := make(chan struct{})
	go func() {
		defer close(ending)
		s.runLockoutEnds(ctx)
	}()
	// The hook runs past ctx, until the rest has written its last events.
	hookCtx, stopHook := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHook()
	hooked := make(chan struct{})
	go func() {
		defer close(hooked)
		if s.hook != nil {
			s.hook.Run(hookCtx)
		}
	}()
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		if r, ok := s.attack.(attackRunner); ok {
			r.Run(ctx)
		}
	}()
	s.runResets(ctx)
	<-janitor
	<-ending
	<-watching
	// Their events before the recorder stops.
	s.detached.settleAll()
	// The watch starts attack mode no more: the second sign-out of a
	// start, and its events, before the recorder stops.
	s.secondPasses.stop()
	stopEvents()
	<-done
	stopHook()
	<-hooked
	s.limits.Close()
}

// Drain is, for a service whose Run never runs (a command that acts once
// and exits), what Run does as it ends: it sends the link mails queued,
// writes the security events queued, lets the hook (Deps.Hook) deliver
// what those rows handed it, and closes the limiter. It does none of
// Run's recurring work: no removal of expired rows, no sweep of the
// lockouts whose time ran out, no attack watch. Those are the running
// servers' to do, by their own settings. Call it once, when nothing uses
// the service any more; it returns the error of writing the events.
func (s *Service) Drain(ctx context.Context) error {
	done, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cancel()
	s.runResets(done) // sends what is queued, within its bound, and returns
	s.secondPasses.stop()
	s.detached.settleAll()
	final, cancelFinal := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelFinal()
	err := s.events.Flush(final)
	if err != nil {
		// Nothing writes them after this: say how many were lost.
		notStored, notCounted := s.events.abandon()
		err = fmt.Errorf("%w; %d events not stored, %d not counted, lost", err, notStored, notCounted)
	}
	if s.hook != nil {
		s.hook.Run(done) // delivers what it holds, within its own bound
	}
	s.limits.Close()
	return err
}

// Degraded reports whether Redis is unreachable and limits follow the
// failure policy.
func (s *Service) Degraded() bool { return s.limits.Degraded() }

// CheckRedis pings Redis once and, when it cannot be reached, puts the
// limits in degraded mode at once: at start, so that the first requests
// do not wait for a dead Redis.
func (s *Service) CheckRedis(ctx context.Context) error { return s.limits.Check(ctx) }

// FailurePolicy returns what limits do while Redis is unreachable.
func (s *Service) FailurePolicy() ratelimit.FailurePolicy { return s.limits.Policy() }

// ResetTTL is how long a reset link works, for the pages that say so.
func (s *Service) ResetTTL() time.Duration { return s.cfg.ResetTTL }

// UnlockTTL is how long an unlock link works, for the pages that say so.
func (s *Service) UnlockTTL() time.Duration { return s.cfg.UnlockTTL }

// VerificationTTL is how long a link that finishes a held sign-in works,
// for the pages that say so.
func (s *Service) VerificationTTL() time.Duration { return s.cfg.VerificationTTL }

// Flush writes the security events queued so far, and the detached writes
// begun (detach); for tests and shutdown.
func (s *Service) Flush(ctx context.Context) error {
	s.detached.settleAll()
	return s.events.Flush(ctx)
}

// DeviceCookieName returns the name of the device cookie for an email as
// typed; "" if it is not a valid address.
func (s *Service) DeviceCookieName(email string) string {
	email, err := NormaliseEmail(email)
	if err != nil {
		return ""
	}
	return s.devices.CookieName(email)
}
