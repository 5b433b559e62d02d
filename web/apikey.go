package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/xcloak/xcloak/auth"
)

// withAPIKey runs h for requests that carry a valid API key as
// "Authorization: Bearer KEY", and answers every other one 401
// {"error":"invalid_api_key"} (429 once its network has failed too many
// checks). The network is the connecting client's, as s.client resolves
// it, never an address a body names.
func (s *Server) withAPIKey(h func(w http.ResponseWriter, r *http.Request, key auth.APIKey)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := s.auth.CheckAPIKey(r.Context(), s.client(r), bearerToken(r))
		if err != nil {
			if errors.Is(err, auth.ErrInvalidAPIKey) {
				w.Header().Set("WWW-Authenticate", "Bearer")
			}
			s.failJSON(w, r, err)
			return
		}
		h(w, r, key)
	})
}

// bearerToken returns the token of a single "Authorization: Bearer TOKEN"
// header; "" for none or any other form.
func bearerToken(r *http.Request) string {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return ""
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
