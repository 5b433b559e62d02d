package web

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
)

// TestAdminAPIErrorsAnswerLikeOthers: an error on the administrators' API
// is answered with the same status, headers and JSON as on any other API
// route, retry_after_seconds included. (The administrators' routes had a
// renderer of their own whose JSON dropped retry_after_seconds.)
func TestAdminAPIErrorsAnswerLikeOthers(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		err  error
		body string
	}{
		{&auth.LimitedError{RetryAfter: 90 * time.Second}, `{"error":"too_many_attempts","retry_after_seconds":90}`},
		{errTooManyStreams, `{"error":"too_many_streams","retry_after_seconds":2}`},
		{auth.ErrUnavailable, `{"error":"unavailable"}`},
		{dashboard.ErrInvalidPeriod, `{"error":"invalid_period"}`},
		{errNotAdmin, `{"error":"forbidden"}`},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			other := httptest.NewRecorder()
			s.fail(other, httptest.NewRequest(http.MethodPost, "/api/v1/login", nil), tc.err)
			admin := httptest.NewRecorder()
			s.fail(admin, httptest.NewRequest(http.MethodGet, "/api/v1/admin/stats", nil), tc.err)
			if got := strings.TrimSpace(admin.Body.String()); got != tc.body {
				t.Errorf("admin API body %s, want %s", got, tc.body)
			}
			if admin.Code != other.Code || admin.Body.String() != other.Body.String() ||
				admin.Header().Get("Retry-After") != other.Header().Get("Retry-After") {
				t.Errorf("admin API: %d %q Retry-After %q\nother API: %d %q Retry-After %q",
					admin.Code, admin.Body, admin.Header().Get("Retry-After"),
					other.Code, other.Body, other.Header().Get("Retry-After"))
			}
		})
	}
}
