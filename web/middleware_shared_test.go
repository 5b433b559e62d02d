package web

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// The header values securityHeaders shares between responses stay as
// they are whatever a handler does with its own response's headers.
func TestSharedHeaderValuesStayPut(t *testing.T) {
	s := &Server{}
	h := s.securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("change") == "" {
			return
		}
		for _, k := range []string{"X-Content-Type-Options", "Referrer-Policy", "X-Frame-Options",
			"Cross-Origin-Opener-Policy", "Permissions-Policy", "Cache-Control", "Content-Security-Policy"} {
			w.Header().Add(k, "changed")
		}
		w.Header().Set("Referrer-Policy", "no-referrer")
		writeJSONBytes(w, http.StatusOK, []byte("{}\n"))
		w.Header().Add("Content-Type", "changed")
	}))
	for _, path := range []string{"/login?change=1", "/api/v1/login?change=1"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/login", nil))
	want := map[string][]string{
		"X-Content-Type-Options": {"nosniff"}, "Referrer-Policy": {"same-origin"}, "X-Frame-Options": {"DENY"},
		"Cross-Origin-Opener-Policy": {"same-origin"}, "Cache-Control": {"no-store"},
		"Permissions-Policy": {"camera=(), microphone=(), geolocation=(), payment=()"},
	}
	for k, v := range want {
		if got := w.Header().Values(k); !slices.Equal(got, v) {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if got := w.Header().Values("Content-Security-Policy"); len(got) != 1 || got[0] != contentSecurityPolicy+formActionSources(nil, false) {
		t.Errorf("Content-Security-Policy: %q", got)
	}
	if !slices.Equal(jsonContentType, []string{"application/json"}) {
		t.Errorf("jsonContentType: %q", jsonContentType)
	}
}
