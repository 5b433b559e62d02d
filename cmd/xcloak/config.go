package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/breached"
	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/internal/urlport"
	"github.com/xcloak/xcloak/ratelimit"
	"github.com/xcloak/xcloak/smtpmail"
	"github.com/xcloak/xcloak/web"
)

// config is every setting of the service, read once at start and passed down.
type config struct {
	// Addr is the host:port the HTTP server listens on; port 0 picks a free one.
	Addr string
	// RedisURL locates the Redis that holds the rate limits.
	RedisURL string
	// RedisCluster makes even a single address a Redis Cluster seed.
	RedisCluster bool
	// DatabaseURL locates the Postgres database; it is created when missing.
	DatabaseURL string
	// SMTPURL is the server reset mails go through; "" writes them to the
	// log, which outside --dev needs MailLog.
	SMTPURL string
	// MailLog allows reset mails, links included, to be written to the
	// log when no SMTP server is set.
	MailLog bool
	// TrustedProxies are the peers whose forwarding header is believed.
	TrustedProxies []netip.Prefix
	// ForwardedHeader is the one header their chain is read from.
	ForwardedHeader web.ForwardedHeader
	// NAT64Prefixes are the operator's translators' prefixes: a client
	// under one is the IPv4 address it embeds.
	NAT64Prefixes []netip.Prefix
	// InsecureCookies drops the Secure attribute, for plain http.
	InsecureCookies bool
	// ProtectedHosts are the hosts forward-auth guards and rd may name.
	ProtectedHosts web.ProtectedHosts
	// CookieDomain is the parent domain the session cookie is issued for;
	// "" keeps it host-only.
	CookieDomain string
	// KeyPrefix namespaces every Redis key.
	KeyPrefix string
	// HashConcurrency bounds the password hashes computed at once; 0 means
	// auth.DefaultHashConcurrency (GOMAXPROCS - 1, at least 1).
	HashConcurrency int
	// MetricsAddr is where /metrics is served: a host:port of its own,
	// metricsOnMain, or metricsOff.
	MetricsAddr string
	// BreachedPasswords names the breach corpus new and signing-in
	// passwords are looked up in: a directory of range files or the base
	// URL of a range API; "" checks none (package breached).
	BreachedPasswords string
	// BreachedTimeout bounds one lookup in it.
	BreachedTimeout time.Duration
	// LogLevel is the least severe level serve's log writes.
	LogLevel slog.Level
	// Auth is the service's behaviour. Its Secret is nil and its PublicURL
	// nil when they were not given: serve fills them in, knowing --dev and
	// the address it listens on.
	Auth auth.Config
	// Attack is when attack mode is entered and left.
	Attack attack.Config
	// Webhook is where security events of interest are POSTed (webhook.go).
	Webhook webhookConfig
	// AdminMFAGiven: XCLOAK_ADMIN_MFA was set, so --dev keeps it rather
	// than making it optional.
	AdminMFAGiven bool
}

// The values of XCLOAK_METRICS_ADDR that name no address.
const (
	metricsOnMain = "main" // /metrics on the main address
	metricsOff    = "off"  // no metrics served
)

// scope is the set of commands that take a setting.
type scope uint8

// The commands that take settings.
const (
	forServe       scope = 1 << iota // xcloak serve
	forUser                          // xcloak user and apikey
	forMigrate                       // xcloak migrate
	forHealthcheck                   // xcloak healthcheck
	// forUserAdd is xcloak user add, which takes forUser's settings too:
	// the one of those commands that sets a password, and so the one that
	// reads the breach corpus. The others run whatever state it is in (a
	// directory gone, or hanging, with its mount), since an unlock or a
	// key's revocation in an incident must not wait on it.
	forUserAdd
)

// setting is one configuration value: an environment variable, a flag that
// overrides it, and a default used when both are absent.
type setting struct {
	env  string
	flag string
	// def is the value used when neither env nor flag is given; "" leaves
	// the field as it is, and show then says what that means.
	def  string
	show string
	// usage describes the setting; a `quoted` word names its value in --help.
	usage string
	// isBool makes "--flag" alone mean true.
	isBool bool
	// fromFile lets the variable named env+"_FILE" give the path of a
	// file holding the value (the convention of container images), so
	// that a secret need not be in the environment or on the command line.
	fromFile bool
	scope    scope
	// set checks value and stores it in c. Its error must not quote a
	// secret, since it is printed.
	set func(c *config, value string) error
}

// shownDefault is the default as --help and README state it.
func (s setting) shownDefault() string {
	if s.def != "" {
		return s.def
	}
	return s.show
}

// settings is every setting, in the order --help and README list them. The
// defaults of the service's behaviour come from auth.DefaultConfig, so they
// are stated in one place.
var settings = append(append(newSettings(auth.DefaultConfig()), attackSettings(attack.DefaultConfig())...), webhookSettings()...)

func newSettings(d auth.Config) []setting {
	// limit is the setting of a rule's limit: XCLOAK_LIMIT_<NAME> and
	// --limit-<name>.
	limit := func(r auth.RuleSpec, def ratelimit.Limit) setting {
		return setting{
			env: limitEnv(r.Name), flag: limitFlag(r.Name), def: formatLimit(def), usage: r.Usage + " as `COUNT/WINDOW`", scope: forServe,
			set: func(c *config, v string) error {
				l, err := ratelimit.ParseLimit(v)
				if err != nil {
					return err
				}
				c.Auth.Limits[r.Name] = l
				return nil
			},
		}
	}
	// duration is a lifetime from least to most. Beyond most a value is
	// a mistake (a link working for years, a session longer than
	// browsers keep its cookie), and a typo such as 12000h for 120h is
	// refused at start rather than granted.
	duration := func(env, flag, usage string, def, least, most time.Duration, field func(*auth.Config) *time.Duration) setting {
		span := formatDuration(least) + " to " + formatDuration(most)
		return setting{
			env: env, flag: flag, def: formatDuration(def), usage: usage + ", as a `duration` from " + span, scope: forServe,
			set: func(c *config, v string) error {
				dur, err := parsePositiveDuration(v)
				if err != nil {
					return err
				}
				if dur < least || dur > most {
					return fmt.Errorf("%s is not from %s", v, span)
				}
				*field(&c.Auth) = dur
				return nil
			},
		}
	}
	// notify is the switch of one of the owner's notices (auth/notify.go).
	notify := func(env, flag, usage string, def bool, field func(*auth.Config) *bool) setting {
		return setting{
			env: env, flag: flag, def: strconv.FormatBool(def), isBool: true, usage: usage, scope: forServe,
			set: func(c *config, v string) error {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("%q is not true or false", v)
				}
				*field(&c.Auth) = b
				return nil
			},
		}
	}
	all := []setting{
		{
			env: "XCLOAK_ADDR", flag: "addr", def: "127.0.0.1:8080", scope: forServe | forHealthcheck,
			usage: "`host:port` to listen on; port 0 picks a free port",
			set:   func(c *config, v string) error { c.Addr = v; return checkAddr(v) },
		},
		{
			env: "XCLOAK_REDIS_URL", flag: "redis-url", def: "redis://127.0.0.1:6379/0", scope: forServe | forUser, fromFile: true,
			usage: "Redis `URL` (redis:// or rediss://); several comma-separated host:port make it a Redis Cluster, ?master_name= a Sentinel set",
			set:   func(c *config, v string) error { c.RedisURL = v; return checkRedisURL(v) },
		},
		{
			env: "XCLOAK_REDIS_CLUSTER", flag: "redis-cluster", def: "false", isBool: true, scope: forServe | forUser,
			usage: "treat XCLOAK_REDIS_URL as a Redis Cluster seed even with one address",
			set: func(c *config, v string) error {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("%q is not true or false", v)
				}
				c.RedisCluster = b
				return nil
			},
		},
		{
			env: "XCLOAK_DATABASE_URL", flag: "database-url", scope: forServe | forUser | forMigrate, fromFile: true,
			def:   "postgres://postgres@127.0.0.1:5432/xcloak?sslmode=disable",
			usage: "Postgres `URL`; the database it names is created when missing",
			set:   func(c *config, v string) error { c.DatabaseURL = v; return checkDatabaseURL(v) },
		},
		{
			env: "XCLOAK_PUBLIC_URL", flag: "public-url", show: "http://<listen address>", scope: forServe,
			usage: "absolute http(s) `URL` where users reach XCloak; reset links start with it",
			set: func(c *config, v string) error {
				u, err := parsePublicURL(v)
				c.Auth.PublicURL = u
				return err
			},
		},
		{
			env: "XCLOAK_SECRET", flag: "secret", show: "none", scope: forServe, fromFile: true,
			usage: "random `key` of at least 32 bytes that signs device cookies and session tokens; required unless --dev. " +
				"A flag is visible in ps: prefer XCLOAK_SECRET_FILE",
			set: func(c *config, v string) error {
				if err := checkSecret(v); err != nil {
					return err
				}
				c.Auth.Secret = []byte(v)
				return nil
			},
		},
		{
			env: "XCLOAK_SMTP_URL", flag: "smtp-url", show: "none", scope: forServe, fromFile: true,
			usage: "SMTP server `URL` for reset mails, smtp[s]://user:pass@host:port?from=address; required unless --dev or XCLOAK_MAIL_LOG",
			set: func(c *config, v string) error {
				if _, err := smtpmail.ParseURL(v); err != nil {
					return err
				}
				c.SMTPURL = v
				return nil
			},
		},
		{
			env: "XCLOAK_MAIL_LOG", flag: "mail-log", def: "false", isBool: true, scope: forServe,
			usage: "without XCLOAK_SMTP_URL, write reset mails, live links included, to the log; serve refuses to start without either, unless --dev",
			set: func(c *config, v string) error {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("%q is not true or false", v)
				}
				c.MailLog = b
				return nil
			},
		},
		{
			env: "XCLOAK_TRUSTED_PROXIES", flag: "trusted-proxies", show: "none", scope: forServe,
			usage: "comma-separated `CIDRs` of proxies whose XCLOAK_FORWARDED_HEADER is believed",
			set: func(c *config, v string) error {
				p, err := web.ParseTrustedProxies(v)
				c.TrustedProxies = p
				return err
			},
		},
		{
			env: "XCLOAK_NAT64_PREFIXES", flag: "nat64-prefixes", show: "none", scope: forServe,
			usage: "comma-separated IPv6 `prefixes` of the operator's NAT64 or SIIT translators (RFC 6052): a client under one is the IPv4 address it embeds",
			set: func(c *config, v string) error {
				p, err := web.ParseNAT64Prefixes(v)
				c.NAT64Prefixes = p
				return err
			},
		},
		{
			env: "XCLOAK_FORWARDED_HEADER", flag: "forwarded-header", def: string(web.HeaderXForwardedFor), scope: forServe,
			usage: "the one `header` trusted proxies name the client in: x-forwarded-for, forwarded (RFC 7239) or none (the peer is the client)",
			set: func(c *config, v string) error {
				h, err := web.ParseForwardedHeader(v)
				c.ForwardedHeader = h
				return err
			},
		},
		{
			env: "XCLOAK_INSECURE_COOKIES", flag: "insecure-cookies", def: "false", isBool: true, scope: forServe,
			usage: "send cookies without Secure, for plain http",
			set: func(c *config, v string) error {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("%q is not true or false", v)
				}
				c.InsecureCookies = b
				return nil
			},
		},
		{
			env: "XCLOAK_PROTECTED_HOSTS", flag: "protected-hosts", show: "none", scope: forServe,
			usage: "comma-separated host `patterns` reverse proxies may ask about (forward-auth) and sign-ins may return to: " +
				"app.example.com or *.example.com (any subdomain, not example.com itself), each optionally =admin (administrators only); " +
				"any other host is refused",
			set: func(c *config, v string) error {
				h, err := web.ParseProtectedHosts(v)
				c.ProtectedHosts = h
				return err
			},
		},
		{
			env: "XCLOAK_COOKIE_DOMAIN", flag: "cookie-domain", show: "none", scope: forServe,
			usage: "parent `domain` the session cookie is issued for (as __Secure-), so that every protected subdomain shares it; " +
				"it must contain XCloak's host and every protected host. Unset: the cookie is host-only (__Host-)",
			set: func(c *config, v string) error {
				d, err := web.ParseCookieDomain(v)
				c.CookieDomain = d
				return err
			},
		},
		{
			// Metrics tell an attacker when the limits are degraded and how
			// busy hashing is, so they stay off the public address unless
			// the operator puts them there.
			env: "XCLOAK_METRICS_ADDR", flag: "metrics-addr", def: "127.0.0.1:9090", scope: forServe,
			usage: "`host:port` of a separate listener for /metrics; " + metricsOnMain + " serves them on the main address, " + metricsOff + " not at all",
			set: func(c *config, v string) error {
				c.MetricsAddr = v
				if v == metricsOnMain || v == metricsOff {
					return nil
				}
				return checkAddr(v)
			},
		},
		{
			env: "XCLOAK_LOG_LEVEL", flag: "log-level", def: "info", scope: forServe,
			usage: "least severe `level` logged: debug (also probes, rejections and forward-auth's answers), info, warn or error",
			set: func(c *config, v string) error {
				l, err := parseLogLevel(v)
				c.LogLevel = l
				return err
			},
		},
		{
			env: "XCLOAK_KEY_PREFIX", flag: "key-prefix", def: "xcloak:", scope: forServe | forUser,
			usage: "`prefix` of every Redis key; instances sharing one Redis need the same",
			set: func(c *config, v string) error {
				if _, err := ratelimit.NewKeys(v, "check"); err != nil {
					return err
				}
				c.KeyPrefix = v
				return nil
			},
		},
		{
			env: "XCLOAK_HASH_CONCURRENCY", flag: "hash-concurrency", show: "GOMAXPROCS - 1, at least 1", scope: forServe,
			usage: "password hashes computed at once (`n`), each taking 19 MiB",
			set: func(c *config, v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return fmt.Errorf("%q is not a whole number of at least 1", v)
				}
				if n > maxHashConcurrency {
					return fmt.Errorf("%d is more than %d: each hash takes 19 MiB, and a flood keeps every slot busy", n, maxHashConcurrency)
				}
				c.HashConcurrency = n
				return nil
			},
		},
		{
			env: "XCLOAK_REDIS_FAILURE", flag: "redis-failure", def: string(d.RedisFailure), scope: forServe,
			usage: "what limits do while Redis is unreachable: local (each replica limits in process), closed (503) or open (no limits, logged)",
			set: func(c *config, v string) error {
				p, err := ratelimit.ParseFailurePolicy(v)
				c.Auth.RedisFailure = p
				return err
			},
		},
		{
			env: "XCLOAK_REDIS_TIMEOUT", flag: "redis-timeout", def: formatDuration(d.RedisTimeout), scope: forServe,
			usage: "how long a limit decision waits for Redis, the wait for a free connection included, as a `duration` from 100ms to 1m",
			set: func(c *config, v string) error {
				dur, err := time.ParseDuration(v)
				if err != nil || dur < 100*time.Millisecond || dur > time.Minute {
					return fmt.Errorf("%q is not a duration from 100ms to 1m", v)
				}
				c.Auth.RedisTimeout = dur
				return nil
			},
		},
		{
			env: "XCLOAK_REJECTION_MEMORY", flag: "rejection-memory", def: formatDuration(d.RejectionMemory), scope: forServe,
			usage: "how long a replica answers a rule Redis said was full without asking again, as a `duration`; 0 asks every time",
			set: func(c *config, v string) error {
				dur, err := time.ParseDuration(v)
				if err != nil || dur < 0 || dur > time.Minute {
					return fmt.Errorf("%q is not a duration from 0s to 1m", v)
				}
				c.Auth.RejectionMemory = dur
				return nil
			},
		},
	}
	// The limits' settings come from auth's table of rules, in its order.
	for _, r := range auth.Rules() {
		if r.OwnLimit() {
			all = append(all, limit(r, d.Limits[r.Name]))
		}
	}
	return append(all, []setting{
		{
			env: "XCLOAK_LOCKOUT_THRESHOLD", flag: "lockout-threshold", def: strconv.Itoa(d.Lockout.Threshold), scope: forServe,
			usage: fmt.Sprintf("consecutive failed sign-ins (`n`, at most %d) that lock an account", ratelimit.MaxCount),
			set: func(c *config, v string) error {
				// Bounded as a limit's count is: a threshold no guesser
				// reaches is a typo that turns lockouts off unseen.
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > ratelimit.MaxCount {
					return fmt.Errorf("%q is not a whole number from 1 to %d", v, ratelimit.MaxCount)
				}
				c.Auth.Lockout.Threshold = n
				return nil
			},
		},
		duration("XCLOAK_LOCKOUT_DURATION", "lockout-duration", "length of the first lockout; each repeat doubles it",
			d.Lockout.Duration, time.Second, ratelimit.MaxWindow, func(a *auth.Config) *time.Duration { return &a.Lockout.Duration }),
		duration("XCLOAK_LOCKOUT_MAX_DURATION", "lockout-max-duration", "longest lockout",
			d.Lockout.MaxDuration, time.Second, ratelimit.MaxWindow, func(a *auth.Config) *time.Duration { return &a.Lockout.MaxDuration }),
		{
			env: "XCLOAK_SPRAY_ACCOUNTS", flag: "spray-accounts", def: strconv.Itoa(d.SprayAccounts), scope: forServe,
			usage: "distinct accounts (`n`, at most 32) one password may fail on within the spraying window before it is refused for every account",
			set: func(c *config, v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > ratelimit.MaxRememberedAttempts {
					return fmt.Errorf("%q is not a whole number from 1 to %d", v, ratelimit.MaxRememberedAttempts)
				}
				c.Auth.SprayAccounts = n
				return nil
			},
		},
		duration("XCLOAK_SPRAY_WINDOW", "spray-window", "window in which a password's failures on distinct accounts are counted, and how long it is then refused",
			d.SprayWindow, time.Second, ratelimit.MaxWindow, func(a *auth.Config) *time.Duration { return &a.SprayWindow }),
		{
			env: "XCLOAK_MAX_DEVICES", flag: "max-devices", def: strconv.Itoa(d.MaxDevices), scope: forServe,
			usage: "known devices (`n`) an account keeps; a new one makes it forget the least recently used",
			set: func(c *config, v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 1000 {
					return fmt.Errorf("%q is not a whole number from 1 to 1000", v)
				}
				c.Auth.MaxDevices = n
				return nil
			},
		},
		{
			env: "XCLOAK_BREACHED_PASSWORDS", flag: "breached-passwords", show: "none", scope: forServe | forUserAdd,
			usage: "breach corpus new passwords and sign-ins are checked against: a `directory` of Pwned Passwords range files, or the base URL of a range API " +
				"(https://api.pwnedpasswords.com, or a mirror), asked for <URL>/range/<5 hex digits of the SHA-1>",
			set: func(c *config, v string) error {
				if _, err := breached.Open(v, 0, nil); err != nil {
					return err
				}
				c.BreachedPasswords = v
				return nil
			},
		},
		{
			env: "XCLOAK_BREACHED_TIMEOUT", flag: "breached-timeout", def: formatDuration(breached.DefaultTimeout), scope: forServe | forUserAdd,
			usage: "how long one breached-password lookup may take, as a `duration` from 10ms to 10s; one that fails or takes longer holds a sign-in from a new browser for verification by mail, and counts a password being set as not breached",
			set: func(c *config, v string) error {
				dur, err := time.ParseDuration(v)
				if err != nil || dur < 10*time.Millisecond || dur > 10*time.Second {
					return fmt.Errorf("%q is not a duration from 10ms to 10s", v)
				}
				c.BreachedTimeout = dur
				return nil
			},
		},
		duration("XCLOAK_SESSION_TTL", "session-ttl", "how long a session lasts",
			d.SessionTTL, time.Minute, maxSessionTTL, func(a *auth.Config) *time.Duration { return &a.SessionTTL }),
		{
			env: "XCLOAK_SESSION_IDLE", flag: "session-idle", def: formatDuration(d.SessionIdle), scope: forServe,
			usage: "how long a session lasts unused before it ends (its sign-in page and forward-auth use count), " +
				"as a `duration` from 5m to " + formatDuration(maxSessionTTL) + ", or off to keep an unused session for its session-ttl",
			set: func(c *config, v string) error {
				if v == "off" {
					c.Auth.SessionIdle = 0
					return nil
				}
				dur, err := time.ParseDuration(v)
				if err != nil {
					return fmt.Errorf("%q is not off or a duration such as 30m or 2h", v)
				}
				if dur < minSessionIdle || dur > maxSessionTTL {
					return fmt.Errorf("%s is not off or from %s to %s", v, formatDuration(minSessionIdle), formatDuration(maxSessionTTL))
				}
				c.Auth.SessionIdle = dur
				return nil
			},
		},
		duration("XCLOAK_RESET_TTL", "reset-ttl", "how long a reset link works",
			d.ResetTTL, time.Minute, maxLinkTTL, func(a *auth.Config) *time.Duration { return &a.ResetTTL }),
		duration("XCLOAK_UNLOCK_TTL", "unlock-ttl", "how long an unlock link works",
			d.UnlockTTL, time.Minute, maxLinkTTL, func(a *auth.Config) *time.Duration { return &a.UnlockTTL }),
		{
			env: "XCLOAK_NEW_DEVICE_VERIFICATION", flag: "new-device-verification", def: string(d.NewDeviceVerification), scope: forServe,
			usage: "when a sign-in from a browser that is not a known device must be finished from a link mailed to the account, " +
				"the same answer whether the password was right or not: `mode` attack (while attack mode is on), always or never",
			set: func(c *config, v string) error {
				m, err := auth.ParseVerificationMode(v)
				c.Auth.NewDeviceVerification = m
				return err
			},
		},
		duration("XCLOAK_VERIFICATION_TTL", "verification-ttl", "how long a link that finishes a sign-in held for new-device verification works",
			d.VerificationTTL, time.Minute, maxVerificationTTL, func(a *auth.Config) *time.Duration { return &a.VerificationTTL }),
		notify("XCLOAK_NOTIFY_NEW_DEVICE", "notify-new-device", "mail the owner when a browser that is no known device signs in to the account",
			d.NotifyNewDevice, func(a *auth.Config) *bool { return &a.NotifyNewDevice }),
		notify("XCLOAK_NOTIFY_LOCKOUT", "notify-lockout", "mail the owner an unlock link when failed sign-ins lock the account",
			d.NotifyLockout, func(a *auth.Config) *bool { return &a.NotifyLockout }),
		notify("XCLOAK_NOTIFY_PASSWORD_CHANGE", "notify-password-change", "mail the owner, with a reset link, when the account's password is changed",
			d.NotifyPasswordChange, func(a *auth.Config) *bool { return &a.NotifyPasswordChange }),
		duration("XCLOAK_EVENT_RETENTION", "event-retention", "how long security events are kept; older ones are removed hourly",
			d.EventRetention, time.Hour, maxEventRetention, func(a *auth.Config) *time.Duration { return &a.EventRetention }),
		{
			env: "XCLOAK_AUDIT_LOG", flag: "audit-log", def: onOff(d.AuditLog), scope: forServe | forUser,
			usage: "`on` or off: write every security event also to the log, as one JSON line with stable fields for a SIEM",
			set: func(c *config, v string) error {
				switch v {
				case "on":
					c.Auth.AuditLog = true
				case "off":
					c.Auth.AuditLog = false
				default:
					return fmt.Errorf("%q is not on or off", v)
				}
				return nil
			},
		},
		{
			env: "XCLOAK_MFA_KEY", flag: "mfa-key", show: "none", scope: forServe, fromFile: true,
			usage: "64 hex digits (32 bytes, e.g. openssl rand -hex 32): seal TOTP secrets at rest with AES-256-GCM; " +
				"without it they are stored as they are. Keep it: without it sealed factors cannot be checked",
			set: func(c *config, v string) error {
				key, err := hex.DecodeString(v)
				if err != nil || len(key) != 32 {
					return errors.New("not 64 hex digits")
				}
				c.Auth.MFA.Key = key
				return nil
			},
		},
		{
			env: "XCLOAK_ADMIN_MFA", flag: "admin-mfa", show: "required (optional with --dev)", scope: forServe,
			usage: "`required`: an administrator without a second factor is sent to enrol one before reaching /admin; or optional",
			set: func(c *config, v string) error {
				m, err := auth.ParseAdminMFA(v)
				c.Auth.MFA.Admins, c.AdminMFAGiven = m, true
				return err
			},
		},
		duration("XCLOAK_MFA_TTL", "mfa-ttl", "how long the second step of a sign-in may be finished after the password",
			d.MFA.ChallengeTTL, 30*time.Second, time.Hour, func(a *auth.Config) *time.Duration { return &a.MFA.ChallengeTTL }),
		{
			// Zero is a choice here: auth then offers no "remember this
			// browser", and a browser remembered before needs its code again.
			env: "XCLOAK_MFA_REMEMBER", flag: "mfa-remember", def: formatDuration(d.MFA.RememberFor), scope: forServe,
			usage: `how long "remember this browser" skips the second step on a known device, as a ` + "`duration` up to 2160h (90 days); 0 remembers no browser",
			set: func(c *config, v string) error {
				dur, err := time.ParseDuration(v)
				if err != nil || dur < 0 || dur > auth.MaxMFARememberFor {
					return fmt.Errorf("%q is not a duration from 0s to 2160h (90 days), such as 0s, 12h or 720h", v)
				}
				c.Auth.MFA.RememberFor = dur
				return nil
			},
		},
		{
			env: "XCLOAK_WEBAUTHN_RP_ID", flag: "webauthn-rp-id", show: "the public URL's host", scope: forServe,
			usage: "`domain` passkeys are registered for: XCLOAK_PUBLIC_URL's host or a parent domain of it and of every XCLOAK_WEBAUTHN_ORIGINS; " +
				"passkeys registered for one never work for another",
			set: func(c *config, v string) error {
				id, err := auth.ParseWebAuthnRPID(v)
				c.Auth.WebAuthn.RPID = id
				return err
			},
		},
		{
			env: "XCLOAK_WEBAUTHN_ORIGINS", flag: "webauthn-origins", show: "the public URL's origin", scope: forServe,
			usage: "comma-separated `origins` (https://host[:port]) passkeys are used from, XCLOAK_PUBLIC_URL's among them, " +
				"each on XCLOAK_WEBAUTHN_RP_ID or a subdomain of it",
			set: func(c *config, v string) error {
				o, err := auth.ParseWebAuthnOrigins(v)
				c.Auth.WebAuthn.Origins = o
				return err
			},
		},
	}...)
}

// onOff is how a setting that is on or off states b.
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// testVariables are the prefixes of the XCLOAK_ variables the tests read
// (internal/testenv, e2e): no setting, and no typo of one.
var testVariables = []string{"XCLOAK_TEST_", "XCLOAK_E2E_"}

// unknownSettings returns, sorted and once each, the names in environ (as
// os.Environ lists it) that start with XCLOAK_ but name no setting of any
// command, nor the _FILE of one that takes a file, nor a variable of the
// tests: most likely typos (XCLOAK_LOCKOUT_THRESHHOLD), which would
// otherwise leave a setting at its default unnoticed.
func unknownSettings(environ []string) []string {
	known := make(map[string]bool, 2*len(settings))
	for _, s := range settings {
		known[s.env] = true
		if s.fromFile {
			known[s.env+"_FILE"] = true
		}
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "XCLOAK_") || known[name] ||
			slices.ContainsFunc(testVariables, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		known[name] = true // warned once
		unknown = append(unknown, name)
	}
	slices.Sort(unknown)
	return unknown
}

// warnUnknownSettings writes a warning, a JSON log line on stderr as serve
// writes its log, for each of unknownSettings(environ): by name, never by
// value, which may be a secret.
func warnUnknownSettings(environ []string, stderr io.Writer) {
	names := unknownSettings(environ)
	if len(names) == 0 {
		return
	}
	log := newLogger(stderr, slog.LevelWarn)
	for _, name := range names {
		log.Warn("unknown XCLOAK_ variable in the environment, ignored: no setting has this name", "variable", name)
	}
}

// settingValue is a setting's flag: it remembers whether the flag was given
// and prints no default of its own, so that --help shows the documented
// default and never a value taken from the environment.
type settingValue struct {
	value  string
	isBool bool
}

func (v *settingValue) String() string     { return "" }
func (v *settingValue) Set(s string) error { v.value = s; return nil }
func (v *settingValue) IsBoolFlag() bool   { return v.isBool }

// loadConfig registers the settings of the commands in sc as flags of fs,
// parses args and resolves each setting: a flag wins over the environment,
// which wins over the default. Settings outside sc take their defaults. An
// invalid value is an error naming the variable or flag it came from. For
// --help it returns flag.ErrHelp after printing the usage to stdout.
func loadConfig(fs *flag.FlagSet, args []string, getenv func(string) string, stdout, stderr io.Writer, sc scope) (config, error) {
	values := make([]*settingValue, len(settings))
	for i, s := range settings {
		if s.scope&sc == 0 {
			continue
		}
		values[i] = &settingValue{isBool: s.isBool}
		usage := s.usage
		if s.fromFile {
			usage += "; " + s.env + "_FILE names a file holding it"
		}
		fs.Var(values[i], s.flag, fmt.Sprintf("%s (env %s, default %s)", usage, s.env, s.shownDefault()))
	}
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return config{}, err
	}
	given := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	// An empty value, from either place, means the default, as it does
	// for an unset variable.
	cfg := config{Auth: auth.DefaultConfig(), Attack: attack.DefaultConfig()}
	for i, s := range settings {
		value, source := "", ""
		if values[i] != nil {
			if v := getenv(s.env); v != "" {
				value, source = v, s.env
				if s.fromFile {
					// Filled from a file (a Kubernetes secret made with
					// --from-file), it holds the line break the file's
					// reader trims: one secret, one key, either way.
					value = trimLineBreak(value)
				}
			}
			if path := getenv(s.env + "_FILE"); s.fromFile && path != "" {
				if value != "" {
					return config{}, fmt.Errorf("%s and %s_FILE are both set: set one", s.env, s.env)
				}
				v, err := readSettingFile(path)
				if err != nil {
					return config{}, fmt.Errorf("%s_FILE: %w", s.env, err)
				}
				value, source = v, s.env+"_FILE"
			}
			if given[s.flag] {
				value, source = values[i].value, "--"+s.flag+" ("+s.env+")"
				// A setting that takes a file may hold a secret, which
				// a flag shows every user in ps while the process runs.
				if s.fromFile && value != "" {
					newLogger(stderr, slog.LevelWarn).Warn("--"+s.flag+" is visible to every user of this machine in ps, "+
						"with any password or key it holds: give "+s.env+"_FILE, a file only XCloak's user reads", "setting", s.env)
				}
			}
		}
		if value == "" {
			value, source = s.def, "default of "+s.env
		}
		if value == "" {
			continue
		}
		if err := s.set(&cfg, value); err != nil {
			return config{}, fmt.Errorf("%s: %w", source, err)
		}
	}
	// The URL was read alone; XCLOAK_REDIS_CLUSTER makes it a Cluster's,
	// which it may not be (a Sentinel set, a database other than 0).
	if cfg.RedisCluster {
		if _, err := redisOptions(cfg.RedisURL, true); err != nil {
			return config{}, fmt.Errorf("XCLOAK_REDIS_URL with XCLOAK_REDIS_CLUSTER: %w", err)
		}
	}
	if err := cfg.Auth.Lockout.Validate(); err != nil {
		return config{}, fmt.Errorf("XCLOAK_LOCKOUT_DURATION, XCLOAK_LOCKOUT_MAX_DURATION: %w", err)
	}
	if err := cfg.Attack.Validate(); err != nil {
		return config{}, fmt.Errorf("XCLOAK_ATTACK_*: %w", err)
	}
	if err := cfg.Webhook.check(cfg.Auth.Secret, cfg.Auth.MFA.Key); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// readSettingFile returns the content of the file at path, without one
// trailing newline (LF or CRLF), as files written by editors and
// "echo > file" end in one. Its errors never quote the content.
// maxSettingFile bounds what a _FILE setting's file may hold.
const maxSettingFile = 64 << 10

func readSettingFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read the file: %w", err)
	}
	defer f.Close()
	// Bounded: a path mistyped as a log file or a device such as
	// /dev/zero must stop start-up with a message, not fill the memory.
	b, err := io.ReadAll(io.LimitReader(f, maxSettingFile+1))
	if err != nil {
		return "", fmt.Errorf("cannot read the file: %w", err)
	}
	if len(b) > maxSettingFile {
		return "", fmt.Errorf("larger than 64 KiB, which no setting is: %s", path)
	}
	v := trimLineBreak(string(b))
	if v == "" {
		return "", fmt.Errorf("the file is empty: %s", path)
	}
	return v, nil
}

// trimLineBreak removes one line break ("\n" or "\r\n") from the end of
// a setting that may come from a file.
func trimLineBreak(v string) string {
	v, ok := strings.CutSuffix(v, "\n")
	if ok {
		v = strings.TrimSuffix(v, "\r")
	}
	return v
}

// The rule XCLOAK_SECRET must follow. Secrets made by openssl rand -hex 32
// or -base64 32 pass it with certainty for any practical purpose: failing
// needs dozens of random characters to fall into a pattern.
const (
	minSecretBytes    = 32
	minSecretDistinct = 10
)

// checkSecret refuses a secret that is short or visibly not random: fewer
// than minSecretDistinct different bytes, or a pattern in the steps
// between neighbouring bytes, where one step (such as a to b) makes more
// than half of them, or the steps repeat with a period of at most half the
// length (abcabc..., a 16-byte piece typed twice). Its errors never quote
// the secret.
func checkSecret(v string) error {
	const hint = " (make one with openssl rand -hex 32)"
	if len(v) < minSecretBytes {
		return fmt.Errorf("%d bytes long, want at least %d%s", len(v), minSecretBytes, hint)
	}
	var seen [256]bool
	distinct := 0
	for i := 0; i < len(v); i++ {
		if !seen[v[i]] {
			seen[v[i]] = true
			distinct++
		}
	}
	if distinct < minSecretDistinct {
		return fmt.Errorf("has only %d different bytes, want at least %d%s", distinct, minSecretDistinct, hint)
	}
	steps := make([]byte, len(v)-1)
	var counts [256]int
	for i := range steps {
		steps[i] = v[i+1] - v[i]
		counts[steps[i]]++
	}
	for _, n := range counts {
		if 2*n > len(steps) {
			return errors.New("is a repeating pattern, not a random key" + hint)
		}
	}
	for period := 1; period <= len(v)/2; period++ {
		repeats := true
		for i := period; i < len(steps) && repeats; i++ {
			repeats = steps[i] == steps[i-period]
		}
		if repeats {
			return errors.New("is a repeating pattern, not a random key" + hint)
		}
	}
	return nil
}

// parseLogLevel reads one of the four levels by name, in any case.
func parseLogLevel(v string) (slog.Level, error) {
	switch strings.ToLower(v) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q is not debug, info, warn or error", v)
}

// limitEnv and limitFlag name the setting of a rule's limit.
func limitEnv(rule string) string  { return "XCLOAK_LIMIT_" + strings.ToUpper(rule) }
func limitFlag(rule string) string { return "limit-" + strings.ReplaceAll(rule, "_", "-") }

// formatLimit writes l as ParseLimit reads it, in the short form: 50/10m.
func formatLimit(l ratelimit.Limit) string {
	return strconv.Itoa(l.Count) + "/" + formatDuration(l.Window)
}

// formatDuration is d.String() without zero trailing units: 10m, not 10m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// The longest lifetimes the settings accept. A session: 400 days, the
// most browsers keep a cookie (RFC 6265bis caps Max-Age there), so that a
// longer one never outlives its cookie unseen. A reset or unlock link:
// a week, for an owner away from their mail, and no more for a mailbox
// read later by someone else; a link that finishes a held sign-in: a day,
// since its sign-in waits on it. Security events: ten years.
const (
	maxSessionTTL      = 400 * 24 * time.Hour
	maxLinkTTL         = 7 * 24 * time.Hour
	maxVerificationTTL = 24 * time.Hour
	maxEventRetention  = 10 * 365 * 24 * time.Hour
)

// minSessionIdle is the shortest idle time a session may be given: its use
// is noted once a minute, so a shorter one would be mostly that minute.
const minSessionIdle = 5 * time.Minute

func parsePositiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 90s, 15m or 12h", v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s is not positive", v)
	}
	return d, nil
}

// parsePublicURL accepts an absolute http or https URL with a host and
// nothing a link could not be built on, a path included. Its errors quote no part of raw,
// which may hold a user and password, or a token in its query.
func parsePublicURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, withoutURL(err)
	}
	switch {
	case u.User != nil:
		return nil, errors.New("must not hold a user or password")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("not an absolute http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("names no host")
	case strings.IndexFunc(u.Host, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0:
		// rd's hosts are compared with it lowered, and lowered by
		// Unicode's rules "İ" would be "i".
		return nil, errors.New("names a host past ASCII: give an internationalised name in its xn-- form")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, errors.New("must not have a query or fragment")
	case u.EscapedPath() != "" && u.EscapedPath() != "/":
		// Pages, forms, cookies and passkeys all live at the host's root:
		// links mailed under a path would open pages whose forms post
		// outside it.
		return nil, errors.New("must not have a path: XCloak is served at the root of its host")
	case !urlport.Valid(u.Port()):
		return nil, errors.New("has a port out of 1 to 65535")
	}
	return u, nil
}

// publicURLFor is the default public URL of a server listening on addr.
func publicURLFor(addr net.Addr) *url.URL {
	return &url.URL{Scheme: "http", Host: browsableAddr(addr)}
}

func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("address %s: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

func checkRedisURL(raw string) error {
	if raw == "" {
		return errors.New("empty")
	}
	_, err := redisOptions(raw, false)
	return err
}

// redisOptions reads XCLOAK_REDIS_URL: redis[s]://[user:password@]host:port[/db][?options]
// with go-redis's options (dial_timeout, pool_size, ...), where host:port
// may be a comma-separated list of addresses (Redis Cluster seeds, or
// Sentinels when the master_name option names the monitored master).
func redisOptions(raw string, cluster bool) (*redis.UniversalOptions, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("want redis://host:port or rediss://host:port")
	}
	// go-redis drops a fragment: a '#' not percent-encoded in a password
	// would leave the URL naming another server, without the password.
	if strings.Contains(raw, "#") {
		return nil, errors.New("has a '#', which no Redis URL holds: percent-encode it (%23) in the user and password")
	}
	userinfo, hostAndRest := "", rest
	if at := strings.LastIndex(rest[:strings.IndexAny(rest+"/?", "/?")], "@"); at >= 0 {
		userinfo, hostAndRest = rest[:at+1], rest[at+1:]
	}
	end := strings.IndexAny(hostAndRest+"/?", "/?")
	hosts, tail := hostAndRest[:end], hostAndRest[end:]

	// master_name is ours, not go-redis's: take it out before parsing.
	var master string
	if path, query, found := strings.Cut(tail, "?"); found {
		values, err := url.ParseQuery(query)
		if err != nil {
			return nil, errors.New("bad query string")
		}
		master = values.Get("master_name")
		values.Del("master_name")
		tail = path
		if q := values.Encode(); q != "" {
			tail += "?" + q
		}
	}

	var first *redis.Options
	var addrs []string
	for i, host := range strings.Split(hosts, ",") {
		// go-redis reads an empty host as localhost:6379: a trailing or
		// doubled comma would add a seed nobody named.
		host = strings.TrimSpace(host)
		if host == "" && scheme != "unix" {
			return nil, fmt.Errorf("address %d of the list is empty", i+1)
		}
		opts, err := redis.ParseURL(scheme + "://" + userinfo + host + tail)
		if err != nil {
			return nil, redisURLError(raw, err)
		}
		if slices.Contains(addrs, opts.Addr) {
			return nil, fmt.Errorf("address %d of the list is listed before", i+1)
		}
		// Quoted neither: an address can hold a piece of a password
		// that was not percent-encoded.
		if _, port, err := net.SplitHostPort(opts.Addr); opts.Network != "unix" && (err != nil || port == "" || !urlport.Valid(port)) {
			return nil, errors.New("an address has a port out of 1 to 65535")
		}
		if first == nil {
			first = opts
		}
		addrs = append(addrs, opts.Addr)
	}
	// Everything redis.ParseURL reads from a URL is kept (a test holds it
	// to that); newRedisClient sets only what XCloak needs on top.
	u := &redis.UniversalOptions{
		Addrs:         addrs,
		MasterName:    master,
		IsClusterMode: cluster && master == "",

		Username:   first.Username,
		Password:   first.Password,
		DB:         first.DB,
		TLSConfig:  first.TLSConfig,
		Protocol:   first.Protocol,
		ClientName: first.ClientName,

		MaxRetries:      first.MaxRetries,
		MinRetryBackoff: first.MinRetryBackoff,
		MaxRetryBackoff: first.MaxRetryBackoff,
		DialTimeout:     first.DialTimeout,
		ReadTimeout:     first.ReadTimeout,
		WriteTimeout:    first.WriteTimeout,

		PoolFIFO:              first.PoolFIFO,
		PoolSize:              first.PoolSize,
		PoolTimeout:           first.PoolTimeout,
		MinIdleConns:          first.MinIdleConns,
		MaxIdleConns:          first.MaxIdleConns,
		MaxActiveConns:        first.MaxActiveConns,
		MaxConcurrentDials:    first.MaxConcurrentDials,
		ConnMaxIdleTime:       first.ConnMaxIdleTime,
		ConnMaxLifetime:       first.ConnMaxLifetime,
		ConnMaxLifetimeJitter: first.ConnMaxLifetimeJitter,

		PipelinePoolSize:        first.PipelinePoolSize,
		PipelineReadBufferSize:  first.PipelineReadBufferSize,
		PipelineWriteBufferSize: first.PipelineWriteBufferSize,
	}
	if cluster && master != "" {
		return nil, errors.New("names a Sentinel master (master_name), which is no Redis Cluster: " +
			"unset XCLOAK_REDIS_CLUSTER, or take master_name out of the URL")
	}
	if (len(addrs) > 1 || cluster) && master == "" && u.DB != 0 {
		return nil, errors.New("a Redis Cluster has only database 0")
	}
	if err := checkRedisPool(first); err != nil {
		return nil, err
	}
	return u, nil
}

// maxRedisPool bounds a Redis URL's pool_size: Redis serves 10000 clients
// by default, and go-redis sizes structures by it when the client is made.
const maxRedisPool = 10000

// maxRedisBuffer bounds a Redis URL's pipeline_read_buffer_size and
// pipeline_write_buffer_size: 1 MiB, eight times go-redis' default, where
// its throughput has long stopped growing.
const maxRedisBuffer = 1 << 20

// checkRedisPool refuses the pool options go-redis takes as they are but
// cannot work with: a pool_size below zero panics when the client is made,
// and a huge one, or a huge pipeline_pool_size, runs the process out of
// memory there; a huge pipeline_read_buffer_size or
// pipeline_write_buffer_size does so at the first pipeline, after the
// start, in a fatal error no recover catches; a dial_timeout or
// pool_timeout of zero or less, which go-redis reads as -1ns, fails every
// dial, or every wait for a busy pool, at once. (A read_timeout or
// write_timeout of zero or less is go-redis' "no deadline", which the
// command's context still bounds.)
func checkRedisPool(o *redis.Options) error {
	switch {
	case o.PoolSize < 0 || o.PoolSize > maxRedisPool:
		return fmt.Errorf("pool_size must be from 1 to %d", maxRedisPool)
	case o.PipelinePoolSize > maxRedisPool:
		// -1 is go-redis' "no pipeline pool".
		return fmt.Errorf("pipeline_pool_size must be at most %d", maxRedisPool)
	case o.PipelineReadBufferSize > maxRedisBuffer:
		// Zero or less is go-redis' default size.
		return fmt.Errorf("pipeline_read_buffer_size must be at most %d", maxRedisBuffer)
	case o.PipelineWriteBufferSize > maxRedisBuffer:
		return fmt.Errorf("pipeline_write_buffer_size must be at most %d", maxRedisBuffer)
	case o.DialTimeout < 0:
		return errors.New("dial_timeout must be positive, such as 2s")
	case o.PoolTimeout < 0:
		return errors.New("pool_timeout must be positive, such as 5s")
	}
	return nil
}

// checkDatabaseURL reads raw as the pool does (poolConfig), its own
// parameters (pool_max_conns and the like) included: one the pool could
// not read would otherwise pass here, and stop the start later with pgx's
// message, which quotes the URL with the password only partly masked.
func checkDatabaseURL(raw string) error {
	pc, err := poolConfig(raw)
	if err != nil {
		return databaseURLError(raw, err)
	}
	if cfg := pc.ConnConfig; cfg.Database == "" {
		return errors.New("it names no database")
	}
	// pgxpool takes it, and the pool's health checks then panic
	// (time.NewTicker) in a goroutine of their own, which no error
	// reaches: the process ends in a stack trace.
	if pc.HealthCheckPeriod <= 0 {
		return errors.New("pool_health_check_period must be positive, such as 1m")
	}
	return nil
}

// withoutURL drops the URL that *url.Error quotes, and any other quoted
// piece of it (net/url quotes the bad "port" of a password holding a '/'),
// as either may hold a password.
func withoutURL(err error) error {
	return invalidURL(urlErrorDetail(err))
}

// urlErrorDetail is what err says is wrong with a URL, without the URL and
// without any quoted piece of it.
func urlErrorDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return strings.TrimPrefix(quotedPart.ReplaceAllString(err.Error(), ""), "net/url: ")
}

func invalidURL(detail string) error {
	return fmt.Errorf("not a valid URL (%s); percent-encode '/', '?', '#', '@', ':' and '%%' in the user and password", detail)
}

// redisURLError is withoutURL for go-redis' errors about the Redis URL
// raw, which quote what they find wrong unquoted: after a password's
// first part that reads as a port (none, or digits), a '?' or '/' that is
// not percent-encoded makes the rest of it a query option or a path, and
// go-redis names that option or path. Should the error hold a piece of
// the user or password, only that the URL does not parse is said.
func redisURLError(raw string, err error) error {
	detail := urlErrorDetail(err)
	for _, piece := range credentialPieces(raw) {
		if strings.Contains(detail, piece) {
			detail = "it does not parse"
			break
		}
	}
	return invalidURL(detail)
}

// databaseURLError says what pgx found wrong with the database URL raw,
// without the URL. pgx quotes it with the password masked, but only as far
// as it can tell the password: after an '@' that is not percent-encoded,
// the rest of the password shows, and the user name always does. So the
// quoted URL is cut off, and so is any quoted piece of it (net/url quotes
// the token it stumbled on); should the rest still hold a piece of the
// user or password, only that the URL does not parse is said.
func databaseURLError(raw string, err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
		msg = ""
		if i := strings.LastIndex(rest, "`: "); i >= 0 {
			msg = rest[i+len("`: "):]
		}
	}
	msg = strings.TrimSpace(quotedPart.ReplaceAllString(msg, ""))
	for _, piece := range credentialPieces(raw) {
		if strings.Contains(msg, piece) {
			msg = ""
		}
	}
	if msg == "" {
		msg = "it does not parse"
	}
	if !strings.Contains(raw, "://") {
		return fmt.Errorf("not a valid connection string (%s)", msg)
	}
	return fmt.Errorf("not a valid URL (%s); percent-encode '/', '?', '#', '@', ':' and '%%' in the user and password", msg)
}

// credentialPieces returns the pieces of a database or Redis URL's user
// and password, split at ':', '@', '/' and at the '?', '#', '&' and '='
// of a query, that are long enough to tell apart from an error's own
// words, each also as it reads decoded: for a URL, all between "://" and
// its last '@'; for the keyword/value form, the values of user and
// password.
func credentialPieces(raw string) []string {
	var creds []string
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			creds = append(creds, rest[:at])
		}
	} else {
		for _, field := range strings.Fields(raw) {
			key, value, _ := strings.Cut(field, "=")
			if key == "user" || key == "password" {
				creds = append(creds, strings.Trim(value, "'"))
			}
		}
	}
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(":@/?#&=", r) })
	}
	var pieces []string
	add := func(p string) {
		if len(p) >= 3 && !slices.Contains(pieces, p) {
			pieces = append(pieces, p)
		}
	}
	for _, c := range creds {
		for _, p := range split(c) {
			add(p)
			// An error may quote a piece decoded, as the path or the
			// query it was read as takes it: "%40" as '@', and in a
			// query '+' as a space; whole, or cut where it decodes to
			// a separator.
			for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
				if d, err := unescape(p); err == nil && d != p {
					add(d)
					for _, q := range split(d) {
						add(q)
					}
				}
			}
		}
	}
	return pieces
}

// quotedPart matches a Go-quoted string and the space before it.
var quotedPart = regexp.MustCompile(` ?"(?:[^"\\]|\\.)*"`)

// universalLabel describes a Redis connection for logs, without its
// credentials.
func universalLabel(opts *redis.UniversalOptions) string {
	scheme := "redis"
	if opts.TLSConfig != nil {
		scheme = "rediss"
	}
	kind := ""
	switch {
	case opts.MasterName != "":
		kind = " (sentinel, master " + opts.MasterName + ")"
	case len(opts.Addrs) > 1 || opts.IsClusterMode:
		kind = " (cluster)"
	}
	return fmt.Sprintf("%s://%s/%d%s", scheme, strings.Join(opts.Addrs, ","), opts.DB, kind)
}

// databaseLabel describes a Postgres connection for logs, without its password.
func databaseLabel(cfg *pgx.ConnConfig) string {
	u := url.URL{
		Scheme: "postgres",
		User:   url.User(cfg.User),
		Host:   net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
		Path:   "/" + cfg.Database,
	}
	return u.String()
}

// broadProxies returns the trusted proxies that take in nearly every
// address: an IPv4 prefix shorter than /8 (10.0.0.0/8, the widest private
// range, is not), an IPv6 one shorter than /7 (fc00::/7, the unique local
// addresses, is not).
func broadProxies(trusted []netip.Prefix) []netip.Prefix {
	var broad []netip.Prefix
	for _, p := range trusted {
		if (p.Addr().Is4() && p.Bits() < 8) || (p.Addr().Is6() && p.Bits() < 7) {
			broad = append(broad, p)
		}
	}
	return broad
}

// maxHashConcurrency bounds XCLOAK_HASH_CONCURRENCY: 256 hashes at once
// hold 4.75 GiB, more than a replica should give to a flood, and a
// mistyped number would otherwise start and exhaust memory under one.
const maxHashConcurrency = 256
