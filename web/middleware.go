package web

import (
	"net/http"
	"strings"
)

// maxBodyBytes caps every request body. The largest legitimate body, a
// sign-in with a password of auth.MaxPasswordBytes, is far below it.
const maxBodyBytes = 64 << 10

// limitBody caps request bodies.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy allows the page's own stylesheet and images and
// nothing else: no scripts inline or foreign, no framing, forms only to us
// (and, added last, to the protected hosts: formActionSources).
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'self'; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// securityHeaders sets the headers every response carries. Pages that show
// a reset token in their URL tighten Referrer-Policy themselves.
func (s *Server) securityHeaders(next http.Handler) http.Handler {
	hsts := s.cfg.PublicURL != nil && s.cfg.PublicURL.Scheme == "https"
	csp := contentSecurityPolicy + formActionSources(s.cfg.ProtectedHosts, s.cfg.InsecureCookies)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if !isAPI(r) {
			// What a browser renders as a document; JSON answers are never
			// rendered, framed or given permissions, and a flood of API
			// rejections should not pay for these headers.
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Frame-Options", "DENY")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
		}
		if hsts {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			// Sign-in pages and API answers are personal: never cache.
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses state-changing requests sent by a browser from
// another origin (Sec-Fetch-Site, else Origin against Host).
func (s *Server) crossOrigin(next http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, errCrossOrigin)
	}))
	return p.Handler(next)
}

// recoverPanics turns a panic in a handler into a logged 500, so that no
// input can take the process down or leave the client without an answer.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", loggablePath(r.URL.Path), "panic", v)
				s.fail(w, r, errInternal)
			}
		}()
		next.ServeHTTP(w, r)
	})
}
