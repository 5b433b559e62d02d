package web

import (
	"net/http"
	"strings"
)

// maxBodyBytes caps every request body. The largest legitimate body, a
// sign-in with a password of auth.MaxPasswordBytes, is far below it.
const maxBodyBytes = 64 << 10

// limitBody caps request bodies. A body of a declared length within the
// cap, or none, is left as it is: net/http reads no more than its
// Content-Length (HTTP/2 refuses more), so the cap would never be reached,
// and its reader is an allocation for every request of a flood.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != http.NoBody && (r.ContentLength <= 0 || r.ContentLength > maxBodyBytes) {
			r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		}
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
	csp := []string{contentSecurityPolicy + formActionSources(s.cfg.ProtectedHosts, s.cfg.InsecureCookies)}
	// Each value is one slice that every response shares, as
	// jsonContentType is: net/http only reads them, and a handler that
	// sets one of these headers again replaces the slice. The keys are in
	// canonical form, as Header.Set would write them.
	var (
		nosniff     = []string{"nosniff"}
		sameOrigin  = []string{"same-origin"}
		deny        = []string{"DENY"}
		permissions = []string{"camera=(), microphone=(), geolocation=(), payment=()"}
		sts         = []string{"max-age=31536000"}
		noStore     = []string{"no-store"}
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["X-Content-Type-Options"] = nosniff
		h["Referrer-Policy"] = sameOrigin
		if !isAPI(r) {
			// What a browser renders as a document; JSON answers are never
			// rendered, framed or given permissions, and a flood of API
			// rejections should not pay for these headers.
			h["Content-Security-Policy"] = csp
			h["X-Frame-Options"] = deny
			h["Cross-Origin-Opener-Policy"] = sameOrigin
			h["Permissions-Policy"] = permissions
		}
		if hsts {
			h["Strict-Transport-Security"] = sts
		}
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			// Sign-in pages and API answers are personal: never cache.
			h["Cache-Control"] = noStore
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
// input can take the process down or leave the client without an answer;
// once the answer has begun, the panic is logged and the connection cut.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "method", loggableMethod(r.Method), "path", loggablePath(r.URL.Path), "panic", v)
				if rec, ok := w.(*statusRecorder); ok && rec.status != 0 {
					// The answer has begun: a 500 now would be appended
					// to it, and read as part of a whole answer. The
					// connection is cut instead, which net/http does
					// quietly for ErrAbortHandler.
					panic(http.ErrAbortHandler)
				}
				s.fail(w, r, errInternal)
			}
		}()
		next.ServeHTTP(w, r)
	})
}
