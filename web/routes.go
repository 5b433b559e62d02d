package web

import (
	"net/http"
	"path"
	"strings"
)

// route is one pattern the service answers and its handler.
type route struct {
	pattern string
	handler http.Handler
}

// routes returns the service's handler: every route of routeTable behind
// the middleware every request passes.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routeTable() {
		mux.Handle(r.pattern, r.handler)
	}
	mux.Handle(apiPrefix, apiFallback(mux))
	return s.logRequests(s.recoverPanics(s.securityHeaders(s.crossOrigin(limitBody(uncleanAPIPaths(mux))))))
}

// routeTable lists every route the service answers; the OpenAPI document's
// test reads the patterns from here too.
func (s *Server) routeTable() []route {
	var table []route
	handle := func(pattern string, h http.Handler) { table = append(table, route{pattern, h}) }

	handle("GET /healthz", handleHealthz())
	handle("GET /readyz", s.handleReadyz())
	handle("GET /static/", handleStatic())
	handle("GET /api/openapi.json", handleOpenAPI())

	handle("GET /{$}", s.handleHome())
	handle("GET /login", s.handleLoginPage())
	handle("POST /login", s.handleLoginForm())
	handle("POST /api/v1/login", s.handleLoginAPI())
	handle("POST /login/mfa", s.handleMFAForm())
	handle("POST /api/v1/login/mfa", s.handleMFAAPI())
	handle("POST /api/v1/login/mfa/webauthn/options", s.handleMFAPasskeyOptions())
	handle("POST /api/v1/login/mfa/webauthn", s.handleMFAPasskey())
	handle("POST /api/v1/login/passkey/options", s.handlePasskeySignInOptions())
	handle("POST /api/v1/login/passkey", s.handlePasskeySignIn())
	handle("GET /logout", s.handleLogoutPage())
	handle("POST /logout", s.handleLogout())
	handle("GET /account", s.handleAccount())

	handle("GET /api/v1/authz/forward-auth", s.handleForwardAuth())
	handle("GET /api/v1/authz/auth-request", s.handleAuthRequest())

	handle("GET /account/password", s.handlePasswordPage())
	handle("POST /account/password", s.handlePasswordForm())
	handle("POST /api/v1/account/password", s.handlePasswordAPI())

	handle("GET /api/v1/account/sessions", s.handleSessionsAPI())
	handle("DELETE /api/v1/account/sessions/{id}", s.handleEndSessionAPI())
	handle("POST /account/sessions/end-others", s.handleEndOtherSessionsForm())
	handle("POST /account/sessions/{id}/end", s.handleEndSessionForm())
	handle("POST /account/devices/{id}/forget", s.handleForgetDeviceForm())

	handle("GET /account/mfa", s.handleFactorsPage())
	handle("GET /account/mfa/totp", s.handleTOTPEnrolPage())
	handle("POST /account/mfa/totp", s.handleTOTPEnrolForm())
	handle("GET /account/mfa/passkey", s.handlePasskeyEnrolPage())
	handle("POST /account/mfa/passkey/options", s.handlePasskeyEnrolOptions())
	handle("POST /account/mfa/passkey", s.handlePasskeyEnrolForm())
	handle("POST /account/mfa/{id}/remove", s.handleRemoveFactorForm())
	handle("POST /account/mfa/recovery", s.handleRecoveryCodesForm())

	handle("GET /account/activity", s.handleActivityPage())
	handle("GET /api/v1/account/activity", s.handleActivityAPI())

	handle("GET /password-reset", s.handleResetRequestPage())
	handle("POST /password-reset", s.handleResetRequestForm())
	handle("POST /api/v1/password-reset", s.handleResetRequestAPI())
	handle("GET /password-reset/{token}", s.handleResetConfirmPage())
	handle("POST /password-reset/{token}", s.handleResetConfirmForm())
	handle("POST /api/v1/password-reset/confirm", s.handleResetConfirmAPI())

	handle("GET /unlock", s.handleUnlockRequestPage())
	handle("POST /unlock", s.handleUnlockRequestForm())
	handle("POST /api/v1/unlock", s.handleUnlockRequestAPI())
	handle("GET /unlock/{token}", s.handleUnlockConfirmPage())
	handle("POST /unlock/{token}", s.handleUnlockConfirmForm())
	handle("POST /api/v1/unlock/confirm", s.handleUnlockConfirmAPI())

	handle("GET /sign-in/{token}", s.handleSignInConfirmPage())
	handle("POST /sign-in/{token}", s.handleSignInConfirmForm())
	handle("POST /api/v1/sign-in/confirm", s.handleSignInConfirmAPI())

	handle("GET /admin", s.handleDashboard())
	handle("GET /admin/stream", s.handleDashboardStream())
	handle("POST /admin/lockouts/unlock", s.handleUnlock())
	handle("POST /admin/users/sign-out", s.handleSignOutEverywhere())
	handle("POST /admin/attack", s.handleAttackSwitch())
	handle("GET /api/v1/admin/stats", s.handleAdminStats())
	handle("GET /admin/events", s.handleEventSearch())
	handle("GET /admin/events.csv", s.handleEventExport())
	handle("GET /api/v1/admin/events", s.handleEventSearchAPI())
	handle("GET /admin/users", s.handleUsers())
	handle("GET /api/v1/admin/users", s.handleUsersAPI())
	handle("GET /admin/users/{id}", s.handleUser())
	handle("GET /admin/users/{id}/delete", s.handleUserDeletePage())
	handle("POST /admin/users/{id}/delete", s.handleUserAction(deleteUser))
	handle("POST /admin/users/{id}/disable", s.handleUserAction(disableUser))
	handle("POST /admin/users/{id}/enable", s.handleUserAction(enableUser))
	handle("POST /admin/users/{id}/promote", s.handleUserAction(promoteUser))
	handle("POST /admin/users/{id}/demote", s.handleUserAction(demoteUser))
	handle("POST /admin/users/{id}/lock", s.handleUserAction(lockUser))
	handle("POST /admin/users/{id}/unlock", s.handleUserAction(unlockUser))
	handle("POST /admin/users/{id}/reset-link", s.handleUserAction(sendResetLink))
	handle("POST /admin/users/{id}/sign-out", s.handleUserAction(signOutUser))
	handle("POST /admin/users/{id}/mfa/remove", s.handleUserAction(removeUserFactors))

	handle("POST /api/v1/attempts", s.handleAttempts())
	handle("POST /api/v1/attempts/{attempt_id}/outcome", s.handleAttemptOutcome())

	if s.cfg.Metrics != nil {
		handle("GET /metrics", s.cfg.Metrics)
	}

	return table
}

// apiPrefix is where the JSON API's routes live.
const apiPrefix = "/api/"

// uncleanAPIPaths answers an API path that net/http's mux would clean,
// one with an empty, "." or ".." segment, as the unknown path it is. The
// mux would redirect it to the cleaned path, in plain text, asking an
// API client to send its POST again somewhere it did not mean to.
func uncleanAPIPaths(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; strings.HasPrefix(p, apiPrefix) && !isClean(p) {
			writeNotFoundJSON(w)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// isClean reports whether the mux leaves p as it is: path.Clean's form,
// with a trailing slash kept.
func isClean(p string) bool {
	trimmed := p
	if len(p) > 1 && p[len(p)-1] == '/' {
		trimmed = p[:len(p)-1]
	}
	return path.Clean(trimmed) == trimmed
}

func writeNotFoundJSON(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "No route of the API has that path."})
}

// apiFallback answers a request under apiPrefix that no route takes as the
// API answers every other error, in JSON: 405 method_not_allowed, with
// Allow, where the path has routes for other methods, 404 not_found
// otherwise. net/http's own answers would be plain text.
func apiFallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			probe := &http.Request{Method: m, URL: r.URL, Host: r.Host}
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != apiPrefix {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			writeNotFoundJSON(w)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method_not_allowed", "message": "That path takes " + strings.Join(allow, ", ") + "."})
	})
}
