package web

import (
	"net/http"
)

// routes lists every route the service answers.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()

	mux.Handle("GET /healthz", handleHealthz())
	mux.Handle("GET /readyz", s.handleReadyz())
	mux.Handle("GET /static/", handleStatic())

	mux.Handle("GET /{$}", s.handleHome())
	mux.Handle("GET /login", s.handleLoginPage())
	mux.Handle("POST /login", s.handleLoginForm())
	mux.Handle("POST /api/v1/login", s.handleLoginAPI())
	mux.Handle("POST /logout", s.handleLogout())
	mux.Handle("GET /account", s.handleAccount())

	mux.Handle("GET /account/password", s.handlePasswordPage())
	mux.Handle("POST /account/password", s.handlePasswordForm())
	mux.Handle("POST /api/v1/account/password", s.handlePasswordAPI())

	mux.Handle("GET /api/v1/account/sessions", s.handleSessionsAPI())
	mux.Handle("DELETE /api/v1/account/sessions/{id}", s.handleEndSessionAPI())
	mux.Handle("POST /account/sessions/end-others", s.handleEndOtherSessionsForm())
	mux.Handle("POST /account/sessions/{id}/end", s.handleEndSessionForm())
	mux.Handle("POST /account/devices/{id}/forget", s.handleForgetDeviceForm())

	mux.Handle("GET /account/activity", s.handleActivityPage())
	mux.Handle("GET /api/v1/account/activity", s.handleActivityAPI())

	mux.Handle("GET /password-reset", s.handleResetRequestPage())
	mux.Handle("POST /password-reset", s.handleResetRequestForm())
	mux.Handle("POST /api/v1/password-reset", s.handleResetRequestAPI())
	mux.Handle("GET /password-reset/{token}", s.handleResetConfirmPage())
	mux.Handle("POST /password-reset/{token}", s.handleResetConfirmForm())
	mux.Handle("POST /api/v1/password-reset/confirm", s.handleResetConfirmAPI())

	mux.Handle("GET /unlock", s.handleUnlockRequestPage())
	mux.Handle("POST /unlock", s.handleUnlockRequestForm())
	mux.Handle("POST /api/v1/unlock", s.handleUnlockRequestAPI())
	mux.Handle("GET /unlock/{token}", s.handleUnlockConfirmPage())
	mux.Handle("POST /unlock/{token}", s.handleUnlockConfirmForm())
	mux.Handle("POST /api/v1/unlock/confirm", s.handleUnlockConfirmAPI())

	mux.Handle("GET /sign-in/{token}", s.handleSignInConfirmPage())
	mux.Handle("POST /sign-in/{token}", s.handleSignInConfirmForm())
	mux.Handle("POST /api/v1/sign-in/confirm", s.handleSignInConfirmAPI())

	mux.Handle("GET /admin", s.handleDashboard())
	mux.Handle("GET /admin/stream", s.handleDashboardStream())
	mux.Handle("POST /admin/lockouts/unlock", s.handleUnlock())
	mux.Handle("POST /admin/users/sign-out", s.handleSignOutEverywhere())
	mux.Handle("POST /admin/attack", s.handleAttackSwitch())
	mux.Handle("GET /api/v1/admin/stats", s.handleAdminStats())

	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.cfg.Metrics)
	}

	return s.logRequests(s.recoverPanics(s.securityHeaders(s.crossOrigin(limitBody(mux)))))
}
