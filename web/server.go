package web

import (
	"context"
	"log"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
)

// Config is the HTTP layer's behaviour.
type Config struct {
	// TrustedProxies are the peers whose forwarding header is believed.
	// Empty: the connection's address is the client.
	TrustedProxies []netip.Prefix
	// ForwardedHeader is the header those proxies' chain is read from;
	// the zero value is X-Forwarded-For.
	ForwardedHeader ForwardedHeader
	// NAT64Prefixes are the operator's translators' prefixes
	// (XCLOAK_NAT64_PREFIXES, ParseNAT64Prefixes): a client under one,
	// the connection's or an application's client_ip, is the IPv4
	// address it embeds. The well-known 64:ff9b::/96 needs no entry.
	NAT64Prefixes []netip.Prefix
	// InsecureCookies drops the Secure attribute (and the __Host- prefix)
	// for local development over plain http.
	InsecureCookies bool
	// PublicURL is where users reach XCloak. With https, responses carry
	// Strict-Transport-Security.
	PublicURL *url.URL
	// ProtectedHosts are the hosts reverse proxies ask about
	// (forward-auth) and that a sign-in may return to (rd).
	ProtectedHosts ProtectedHosts
	// CookieDomain, when set, is the parent domain the session cookie is
	// issued for, so that every protected subdomain receives it; the
	// cookie is then __Secure- instead of __Host-. Device cookies stay
	// host-only. Check it with CheckCookieDomain.
	CookieDomain string
	// Metrics, when set, is served at GET /metrics (Prometheus). Leave it
	// nil when metrics have their own listener.
	Metrics http.Handler
}

// ReadyCheck reports whether the backing stores answer.
type ReadyCheck func(ctx context.Context) map[string]error

// Server holds what the handlers share.
type Server struct {
	cfg      Config
	auth     *auth.Service
	ready    *readiness
	log      *slog.Logger
	clientIP *ClientIPResolver
	// redirects decides where rd may send a browser (redirect.go).
	redirects redirectRule

	// dashboard reads the security team's figures and events.
	dashboard *dashboard.Reader
}

// NewServer returns XCloak's HTTP handler; board serves the
// administrators' dashboard.
func NewServer(cfg Config, svc *auth.Service, board *dashboard.Reader, ready ReadyCheck, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:      cfg,
		auth:     svc,
		ready:    &readiness{check: ready, log: log},
		log:      log,
		clientIP: NewClientIPResolver(cfg.TrustedProxies, cfg.ForwardedHeader),

		dashboard: board,
	}
	s.clientIP.log = log
	s.clientIP.translators = cfg.NAT64Prefixes
	s.redirects = s.redirectRule()
	return s.routes()
}

// client is the request's sender as the limits see it.
func (s *Server) client(r *http.Request) auth.Client {
	return auth.Client{Addr: s.clientIP.ClientIP(r), UserAgent: headerValue(r, "User-Agent")}
}

// headerValue is r.Header.Get(key) for a key in canonical form, which
// Header.Get would check and canonicalise again on every request.
func headerValue(r *http.Request, key string) string {
	if v := r.Header[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// NewHTTPServer returns the http.Server that serves h, XCloak's handler,
// with the bounds every connection gets: how long a client may take to
// send its request's header, its whole request, and to read the answer,
// how long an idle connection stays open, and how large a header may be.
// errorLog receives net/http's own complaints.
func NewHTTPServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          errorLog,
	}
}
