package main

import (
	"bytes"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/counters"
	"github.com/xcloak/xcloak/webhook"
)

// webhookConfig is where security events of interest are POSTed.
type webhookConfig struct {
	// URLs are the receivers; none: no webhooks.
	URLs []*url.URL
	// Secrets key the signatures: one for every URL, or one per URL in
	// their order; set exactly when URLs are.
	Secrets [][]byte
}

// webhookSettings are XCLOAK_WEBHOOK_URL and XCLOAK_WEBHOOK_SECRET. The
// user and apikey commands take them too, so that an unlock, a disabling,
// an account or a key made from the command line is sent like one from
// the dashboard.
func webhookSettings() []setting {
	return []setting{
		{
			env: "XCLOAK_WEBHOOK_URL", flag: "webhook-url", show: "none", scope: forServe | forUser, fromFile: true,
			usage: "comma-separated `URLs` to POST security events of interest to, signed with XCLOAK_WEBHOOK_SECRET",
			set: func(c *config, v string) error {
				urls, err := parseWebhookURLs(v)
				c.Webhook.URLs = urls
				return err
			},
		},
		{
			env: "XCLOAK_WEBHOOK_SECRET", flag: "webhook-secret", show: "none", scope: forServe | forUser, fromFile: true,
			usage: "random `key` of at least 32 bytes that signs the webhooks, or comma-separated keys (so none with a comma in it), one per URL of XCLOAK_WEBHOOK_URL in its order; " +
				"required with XCLOAK_WEBHOOK_URL. A flag is visible in ps: prefer XCLOAK_WEBHOOK_SECRET_FILE",
			set: func(c *config, v string) error {
				c.Webhook.Secrets = nil
				parts := strings.Split(v, ",")
				if len(parts) == 1 {
					// One secret, as it is: spaces and all.
					if err := checkSecret(v); err != nil {
						return err
					}
					c.Webhook.Secrets = [][]byte{[]byte(v)}
					return nil
				}
				// A list, written as the URLs' is: spaces around its
				// items are not theirs. Each secret one receiver's alone.
				for i, p := range parts {
					p = strings.TrimSpace(p)
					if err := checkSecret(p); err != nil {
						return fmt.Errorf("secret %d of the list: %w", i+1, err)
					}
					for j, q := range c.Webhook.Secrets {
						if subtle.ConstantTimeCompare(q, []byte(p)) == 1 {
							return fmt.Errorf("secret %d of the list is secret %d: each receiver's must be its own, or give one secret for all", i+1, j+1)
						}
					}
					c.Webhook.Secrets = append(c.Webhook.Secrets, []byte(p))
				}
				return nil
			},
		},
	}
}

// parseWebhookURLs reads a comma-separated list of absolute http(s) URLs
// with a host and no user name or password, each listed once (the same
// receiver twice, by a host in other capitals or its default port, would
// get every event twice). Its errors quote no URL (one may carry a token
// in its path or query) but its place.
func parseWebhookURLs(v string) ([]*url.URL, error) {
	var out []*url.URL
	seen := map[string]bool{}
	for i, raw := range strings.Split(v, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return nil, fmt.Errorf("URL %d of the list is empty", i+1)
		}
		// url.Parse takes a space in a path: two URLs separated by one
		// would be a single URL to a path that is not there.
		if strings.ContainsFunc(raw, unicode.IsSpace) {
			return nil, fmt.Errorf("URL %d of the list has a space in it: separate URLs with commas", i+1)
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("URL %d of the list is not a URL", i+1)
		}
		if err := webhook.CheckURL(u); err != nil {
			return nil, fmt.Errorf("URL %d of the list: %w", i+1, err)
		}
		key := sameReceiver(u)
		if seen[key] {
			return nil, fmt.Errorf("URL %d of the list is listed before", i+1)
		}
		seen[key] = true
		out = append(out, u)
	}
	return out, nil
}

// sameReceiver is u as two URLs of one receiver both write it: the host
// in lower case, the port without leading zeros and without it if it is
// the scheme's default, and an empty path as "/", which is what a client
// asks for then.
func sameReceiver(u *url.URL) string {
	c := *u
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if n, err := strconv.Atoi(port); err == nil { // webhook.CheckURL took it
		port = strconv.Itoa(n)
	}
	if c.Path == "" {
		c.Path, c.RawPath = "/", ""
	}
	if port == "" || (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		c.Host = host
		if strings.Contains(host, ":") {
			c.Host = "[" + host + "]"
		}
	} else {
		c.Host = net.JoinHostPort(host, port)
	}
	return c.String()
}

// check refuses URLs without a secret, a secret without URLs (a setting
// that does nothing is a mistake worth saying at start), and a secret
// that is one of the service's own: every receiver holds the webhook
// secret. master is XCLOAK_SECRET (nil: not known yet), which signs device
// cookies and keys the service's other MACs; mfaKey is XCLOAK_MFA_KEY's
// 32 bytes (nil: none), which seals the authenticator-app secrets in the
// database, and which an operator would reuse as the same 64 hex digits.
func (w webhookConfig) check(master, mfaKey []byte) error {
	for _, secret := range w.Secrets {
		switch {
		case master != nil && subtle.ConstantTimeCompare(secret, master) == 1:
			return errors.New("XCLOAK_WEBHOOK_SECRET is XCLOAK_SECRET: every webhook receiver would hold the key that signs " +
				"XCloak's device cookies; give the webhooks a secret of their own (openssl rand -hex 32)")
		case mfaKey != nil && isKey(secret, mfaKey):
			return errors.New("XCLOAK_WEBHOOK_SECRET is XCLOAK_MFA_KEY: every webhook receiver would hold the key that seals " +
				"the authenticator-app secrets in the database; give the webhooks a secret of their own (openssl rand -hex 32)")
		}
	}
	switch {
	case len(w.URLs) > 0 && w.Secrets == nil:
		return errors.New("XCLOAK_WEBHOOK_URL is set without XCLOAK_WEBHOOK_SECRET (or _FILE): " +
			"webhooks are always signed; make a secret with openssl rand -hex 32 and give it to the receivers")
	case len(w.URLs) == 0 && w.Secrets != nil:
		return errors.New("XCLOAK_WEBHOOK_SECRET is set without XCLOAK_WEBHOOK_URL: set the receivers' URLs, or unset the secret")
	case len(w.Secrets) > 1 && len(w.Secrets) != len(w.URLs):
		return fmt.Errorf("XCLOAK_WEBHOOK_SECRET lists %d secrets for the %d URLs of XCLOAK_WEBHOOK_URL: "+
			"give one secret for every receiver, or one per URL in the same order", len(w.Secrets), len(w.URLs))
	}
	return nil
}

// isKey reports whether secret is key, as its bytes or its hex digits in
// either case.
func isKey(secret, key []byte) bool {
	digits := []byte(hex.EncodeToString(key))
	return subtle.ConstantTimeCompare(secret, key) == 1 ||
		subtle.ConstantTimeCompare(bytes.ToLower(secret), digits) == 1
}

// newWebhooks returns the Sender of cfg's webhooks, counting its drops in
// the dashboard's counters in rdb, or nil when no URL is set; the service
// runs it. Its metrics are registered on metrics either way. A URL in
// plain http is allowed, and logged at start: the signature keeps a
// receiver from taking a forged or replayed event, but the events' accounts
// and addresses cross the network as they are.
func newWebhooks(cfg config, logger *slog.Logger, metrics prometheus.Registerer, rdb redis.UniversalClient) (auth.EventHook, error) {
	if len(cfg.Webhook.URLs) == 0 {
		if metrics == nil {
			return nil, nil
		}
		return nil, webhook.RegisterMetrics(metrics)
	}
	stats, err := counters.New(rdb, cfg.KeyPrefix)
	if err != nil {
		return nil, err
	}
	wc := webhook.DefaultConfig()
	wc.URLs = cfg.Webhook.URLs
	if len(cfg.Webhook.Secrets) == 1 {
		wc.Secret = cfg.Webhook.Secrets[0]
	} else {
		wc.Secrets = cfg.Webhook.Secrets
	}
	s, err := webhook.New(wc, webhook.Deps{Logger: logger, Metrics: metrics, Dropped: stats})
	if err != nil {
		return nil, err
	}
	hosts := make([]string, len(wc.URLs))
	for i, u := range wc.URLs {
		hosts[i] = u.Scheme + "://" + u.Host
		if u.Scheme == "http" && !isLoopback(u.Hostname()) {
			logger.Warn("webhook URL in plain http: events, with accounts and addresses, cross the network unencrypted",
				"url", hosts[i])
		}
	}
	logger.Info("webhooks ready", "receivers", hosts)
	return s, nil
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
