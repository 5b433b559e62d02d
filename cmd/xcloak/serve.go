package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/web"
)

// shutdownTimeout is how long requests in flight get to finish once
// shutdown begins.
const shutdownTimeout = 10 * time.Second

// serve runs the HTTP service until ctx is cancelled, then shuts it down
// gracefully.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("xcloak", "serve", "[flags]",
		"Checks Redis, creates the database if missing, applies migrations, then\n"+
			"serves HTTP until interrupted. Logs are JSON lines on stderr. Every flag\n"+
			"can be given as the environment variable named with it; the flag wins.\n")
	dev := fs.Bool("dev", false, "development mode on this machine: cookies without Secure, the secret kept in "+
		devSecretPath+", reset mails in the log unless XCLOAK_SMTP_URL is set, and a demo admin "+
		demoAdminEmail+" with a new password printed at every start")
	cfg, err := loadConfig(fs, args, getenv, stdout, stderr, forServe)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logger := newLogger(stderr, cfg.LogLevel)
	redisLogLevel.Set(cfg.LogLevel)

	if *dev {
		if err := devOnThisMachine(cfg.Addr, cfg.Auth.PublicURL); err != nil {
			return err
		}
		cfg.InsecureCookies = true
		if !cfg.AdminMFAGiven {
			cfg.Auth.MFA.Admins = auth.AdminMFAOptional
		}
		if cfg.Auth.Secret == nil {
			if cfg.Auth.Secret, err = loadDevSecret(devSecretPath); err != nil {
				return err
			}
			if err := cfg.Webhook.check(cfg.Auth.Secret, cfg.Auth.MFA.Key); err != nil {
				return err
			}
		}
		logger.Warn("development mode: cookies without Secure, demo admin enabled; do not expose this server")
	}
	if cfg.Auth.Secret == nil {
		// An empty value is no value (loadConfig), so this is also what
		// --secret= or XCLOAK_SECRET= of a shell variable never set gets.
		return errors.New("XCLOAK_SECRET is not set, or empty (as is --secret): give a random key of at least 32 bytes " +
			"(e.g. openssl rand -hex 32), or run with --dev on a development machine")
	}
	// A reset link in a log is a password for whoever reads the log, so
	// production writes them there only when told to, and says so at
	// every start.
	if cfg.SMTPURL == "" && !*dev {
		if !cfg.MailLog {
			return errors.New("XCLOAK_SMTP_URL is not set: set it, or XCLOAK_MAIL_LOG=true to write reset mails, " +
				"live links included, to the log")
		}
		logger.Warn("XCLOAK_SMTP_URL is not set and XCLOAK_MAIL_LOG is true: reset mails, links included, are written to this log")
	}
	if cfg.SMTPURL == "" && cfg.LogLevel > slog.LevelWarn {
		// The log's mailer writes at warn: quieted, every link would be
		// lost while the service counts its mail sent.
		return errors.New("XCLOAK_SMTP_URL is not set, so mails are written to the log at warn, which XCLOAK_LOG_LEVEL=" +
			strings.ToLower(cfg.LogLevel.String()) + " hides: set XCLOAK_SMTP_URL, or a log level of warn or below")
	}

	// Listening first fails fast on a taken port and tells the default
	// public URL which port 0 picked.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	defer ln.Close()
	if cfg.Auth.PublicURL == nil {
		cfg.Auth.PublicURL = publicURLFor(ln.Addr())
		// Listening on every interface (the image does), users reach it
		// from elsewhere, and a link to localhost reaches none of them.
		if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() && !*dev {
			logger.Warn("XCLOAK_PUBLIC_URL is not set: the links mailed (reset, unlock, sign-in) start with "+
				cfg.Auth.PublicURL.String()+", which only this machine reaches, and passkeys are bound to it; "+
				"set it to the address users see, such as https://login.example.com", "public_url", cfg.Auth.PublicURL.String())
		}
	}
	if err := web.CheckCookieDomain(cfg.CookieDomain, cfg.Auth.PublicURL.Host, cfg.ProtectedHosts); err != nil {
		return err
	}
	// The relying party of passkeys against the public URL, known only
	// now; NewService checks it again.
	if _, err := cfg.Auth.WebAuthn.Resolve(cfg.Auth.PublicURL); err != nil {
		return err
	}
	if len(cfg.ProtectedHosts) > 0 && cfg.CookieDomain == "" {
		// A host-only cookie reaches the protected hosts only when the
		// proxy serves them on XCloak's own host.
		logger.Warn("XCLOAK_PROTECTED_HOSTS is set without XCLOAK_COOKIE_DOMAIN: the session cookie is host-only, " +
			"so forward-auth sees it only for requests to XCloak's own host")
	}

	for _, p := range broadProxies(cfg.TrustedProxies) {
		logger.Warn("XCLOAK_TRUSTED_PROXIES trusts "+p.String()+", nearly every address: a client there names its own "+
			"address in the forwarded header, and so escapes the limits per address and network; list the proxies' own addresses",
			"header", string(cfg.ForwardedHeader))
	}
	for _, w := range web.TrustedOverTranslators(cfg.TrustedProxies, cfg.NAT64Prefixes) {
		logger.Warn("XCLOAK_TRUSTED_PROXIES trusts "+w.Trusted.String()+", which holds the IPv4 clients "+w.IPv4.String()+
			" through the translator prefix "+w.Translator.String()+": each of them is a trusted proxy, names its own "+
			"address in the forwarded header, and so escapes the limits per address and network; list the proxies' own addresses",
			"header", string(cfg.ForwardedHeader))
	}
	// An operator's choice, but one that hands the limits to the network:
	// said once at start, as a plain-http breach corpus is.
	if opts, err := redisOptions(cfg.RedisURL, cfg.RedisCluster); err == nil && opts.TLSConfig != nil && opts.TLSConfig.InsecureSkipVerify {
		logger.Warn("XCLOAK_REDIS_URL sets skip_verify: Redis' TLS certificate is not checked, so anyone on the path " +
			"can stand in for Redis and answer every limit and lockout as it likes; give the server's CA instead")
	}
	// Not refused, as a weak XCLOAK_SECRET is: the factors sealed with
	// this key could not be sealed anew, and would be lost with it.
	if key := cfg.Auth.MFA.Key; key != nil && checkSecret(string(key)) != nil {
		logger.Warn("XCLOAK_MFA_KEY is not a random key (a placeholder, or a pattern): whoever guesses it opens the " +
			"authenticator-app secrets sealed with it; make one with openssl rand -hex 32 before factors are enrolled " +
			"(docs/DEPLOY.md says how to replace it once factors are sealed with it)")
	}
	// Not refused either, for the same reason: one key for both hands
	// the sealed secrets to whoever holds XCLOAK_SECRET, and rotating a
	// leaked secret leaves them sealed with it.
	if key := cfg.Auth.MFA.Key; key != nil && isKey(cfg.Auth.Secret, key) {
		logger.Warn("XCLOAK_MFA_KEY is XCLOAK_SECRET: the authenticator-app secrets are sealed with the key that signs " +
			"XCloak's cookies, which a new XCLOAK_SECRET after a leak does not change; give the factors a key of their own " +
			"before they are enrolled (openssl rand -hex 32; docs/DEPLOY.md says how to replace it once factors are sealed with it)")
	}
	if u := cfg.Auth.PublicURL; u.Scheme == "http" && !*dev && !isLoopback(u.Hostname()) {
		// A forgotten "s" behind a TLS proxy: sign-ins still work, over
		// the browser's https, while every mailed link goes out in clear.
		logger.Warn("XCLOAK_PUBLIC_URL "+u.String()+" is plain http on a host others reach: the links mailed (reset, "+
			"unlock, sign-in) carry their tokens in clear, no HSTS is sent and passkeys are off; "+
			"give the https address users see", "public_url", u.String())
	}
	if cfg.InsecureCookies && cfg.Auth.PublicURL.Scheme == "https" {
		logger.Warn("XCLOAK_INSECURE_COOKIES is true with an https XCLOAK_PUBLIC_URL: cookies go without Secure, " +
			"so a browser also sends them over plain http, where anyone on the path reads them")
	}

	build := readBuildInfo(version, debug.ReadBuildInfo)
	registry := newRegistry()
	metrics := promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)})

	b, err := openBackend(ctx, cfg, logger, registry, true)
	if err != nil {
		return err
	}
	b.start(ctx)
	defer b.Close() // on the way out of a failed start

	var demoPassword string
	if *dev {
		if demoPassword, err = resetDemoAdmin(ctx, b); err != nil {
			return err
		}
	} else {
		warnDemoAdmin(ctx, b, logger)
	}

	webCfg := web.Config{
		TrustedProxies:  cfg.TrustedProxies,
		ForwardedHeader: cfg.ForwardedHeader,
		NAT64Prefixes:   cfg.NAT64Prefixes,
		InsecureCookies: cfg.InsecureCookies,
		PublicURL:       cfg.Auth.PublicURL,
		ProtectedHosts:  cfg.ProtectedHosts,
		CookieDomain:    cfg.CookieDomain,
	}
	metricsURL := ""
	switch cfg.MetricsAddr {
	case metricsOff:
	case metricsOnMain:
		webCfg.Metrics = metrics
	default:
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("XCLOAK_METRICS_ADDR: listen on %s: %w", cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics)
		metricsSrv := newMetricsServer(mux, slog.NewLogLogger(logger.Handler(), slog.LevelWarn))
		metricsServed := make(chan error, 1)
		go func() { metricsServed <- metricsSrv.Serve(mln) }()
		defer func() {
			_ = stopHTTP(ctx, metricsSrv, metricsServed)
		}()
		logger.Info("metrics listening", "addr", mln.Addr().String())
		metricsURL = "http://" + browsableAddr(mln.Addr()) + "/metrics"
	}
	srv := web.NewHTTPServer(web.NewServer(webCfg, b.svc, b.dashboard, b.ready, logger),
		slog.NewLogLogger(logger.Handler(), slog.LevelWarn))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	logger.Info("listening", "addr", ln.Addr().String(), "public_url", cfg.Auth.PublicURL.String(),
		"version", build.Version, "revision", build.Revision)
	fmt.Fprintf(stdout, "XCloak listening on http://%s\n", browsableAddr(ln.Addr()))
	if metricsURL != "" {
		fmt.Fprintf(stdout, "Metrics at %s\n", metricsURL)
	}
	if *dev {
		fmt.Fprintf(stdout, "Demo admin: %s / %s   (development mode: new password at every start)\n", demoAdminEmail, demoPassword)
	}

	select {
	case err := <-served:
		return fmt.Errorf("serve HTTP: %w", err)
	case <-ctx.Done():
	}
	// The HTTP server stops first, so that the requests in flight finish
	// and record their events; then the service writes every queued event
	// and sends the queued mails before the stores close.
	logger.Info("shutting down", "timeout_seconds", shutdownTimeout.Seconds())
	err = stopHTTP(ctx, srv, served)
	b.Close()
	logger.Info("stopped")
	return err
}

// newMetricsServer is the server of the metrics listener, bounded as the
// main one is (web.NewHTTPServer): without an idle timeout, a connection
// left open after a scrape, or opened and left, would stay as long as its
// peer liked, and any peer that reaches the port could take up the
// process' files, which the main listener shares.
func newMetricsServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return web.NewHTTPServer(h, errorLog)
}

// stopHTTP shuts srv down: no new connections, and the requests in flight
// get shutdownTimeout to finish before their connections are closed.
func stopHTTP(ctx context.Context, srv *http.Server, served <-chan error) error {
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shut down HTTP server: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve HTTP: %w", err)
	}
	return nil
}

// browsableAddr is addr as a browser can open it: a server listening on every
// interface is reached through localhost.
func browsableAddr(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("localhost", fmt.Sprint(tcp.Port))
}
