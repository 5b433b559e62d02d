package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/xcloak/xcloak/auth"
)

// withAPIKey runs h for requests that carry a valid API key as
// "Authorization: Bearer KEY", with their body decoded into a T
// (decodeFields), and answers every other one 401
// {"error":"invalid_api_key"} (429 once its network has failed too many
// checks). The network is the connecting client's, as s.client resolves
// it, never an address a body names.
//
// The key is checked before the body is read, so that a request without
// one costs no read, and again once it is read: a body may take as long
// as the server's ReadTimeout to come in, and a key revoked meanwhile
// must not act, or its holder could open requests ahead and send their
// bodies once it is revoked.
func withAPIKey[T any](s *Server, h func(w http.ResponseWriter, r *http.Request, key auth.APIKey, in *T)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.checkAPIKey(w, r); !ok {
			return
		}
		var in T
		decodeErr := decodeFields(r, &in)
		key, ok := s.checkAPIKey(w, r)
		if !ok {
			return
		}
		if decodeErr != nil {
			s.failJSON(w, r, decodeErr)
			return
		}
		h(w, r, key, &in)
	})
}

// checkAPIKey returns the request's key, or answers that it has none
// valid.
func (s *Server) checkAPIKey(w http.ResponseWriter, r *http.Request) (auth.APIKey, bool) {
	key, err := s.auth.CheckAPIKey(r.Context(), s.client(r), bearerToken(r))
	if err != nil {
		if errors.Is(err, auth.ErrInvalidAPIKey) {
			w.Header().Set("WWW-Authenticate", "Bearer")
		}
		s.failJSON(w, r, err)
		return auth.APIKey{}, false
	}
	return key, true
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
