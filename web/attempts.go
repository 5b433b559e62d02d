package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/xcloak/xcloak/auth"
)

// The decision API (auth/decisions.go): an application with its own users
// asks whether an attempt may go ahead, and reports how it ended.

// attemptBody is the question of POST /api/v1/attempts.
type attemptBody struct {
	Kind     string `json:"kind"`
	Account  string `json:"account"`
	ClientIP string `json:"client_ip"`
	Device   string `json:"device"`
}

// outcomeBody is the report of POST /api/v1/attempts/{attempt_id}/outcome.
type outcomeBody struct {
	Result string `json:"result"`
}

// decisionBody is a decision's answer.
type decisionBody struct {
	Decision          string `json:"decision"`
	AttemptID         string `json:"attempt_id,omitempty"`
	Reason            string `json:"reason,omitempty"`
	RetryAfterSeconds int    `json:"retry_after_seconds,omitempty"`
}

func (s *Server) handleAttempts() http.Handler {
	return withAPIKey(s, func(w http.ResponseWriter, r *http.Request, key auth.APIKey, in *attemptBody) {
		d, err := s.auth.Decide(r.Context(), key, auth.AttemptRequest{Kind: in.Kind, Account: in.Account, ClientIP: s.translated(in.ClientIP), Device: in.Device})
		if errors.Is(err, auth.ErrLimited) {
			p := problemFor(err)
			setRetryAfter(w, p)
			writeJSON(w, p.status, decisionBody{Decision: "deny", Reason: p.code, RetryAfterSeconds: p.retryAfter})
			return
		}
		if err != nil {
			s.failJSON(w, r, err)
			return
		}
		decision := "allow"
		if d.Challenge {
			decision = "challenge"
		}
		writeJSON(w, http.StatusOK, decisionBody{Decision: decision, AttemptID: d.AttemptID})
	})
}

func (s *Server) handleAttemptOutcome() http.Handler {
	return withAPIKey(s, func(w http.ResponseWriter, r *http.Request, key auth.APIKey, in *outcomeBody) {
		if err := s.auth.AttemptOutcome(r.Context(), key, r.PathValue("attempt_id"), in.Result); err != nil {
			s.failJSON(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// maxEchoedField bounds an unknown field's name an answer repeats.
const maxEchoedField = 64

// decodeFields reads exactly one JSON object of string fields into dst, a
// pointer to a struct of strings, as decodeJSON does, and says what is
// wrong in an *auth.FieldError: the field at fault, or "body" for the body
// as a whole.
func decodeFields(r *http.Request, dst any) error {
	bodyErr := func(msg string) error { return &auth.FieldError{Field: "body", Message: msg} }
	if !unencodedBody(r) {
		return bodyErr("must be sent uncompressed, with no Content-Encoding")
	}
	if !hasContentType(r, "application/json") {
		return bodyErr("must be JSON in UTF-8, sent as Content-Type: application/json (a charset, if named, utf-8)")
	}
	buf, err := readBody(r)
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return bodyErr("must be at most 64 KiB")
		}
		return bodyErr("could not be read")
	}
	// Both decoders below copy what they keep out of the body.
	defer putBody(buf)
	body := buf.Bytes()
	if !utf8.Valid(body) {
		return bodyErr("must be UTF-8")
	}
	// The common body, strings without escapes under the fields' own
	// names, needs neither the search for duplicate keys nor
	// encoding/json: what the fast path accepts, the checks below accept
	// with the same values (flatjson.go).
	if decodeFlatInto(body, dst) {
		return nil
	}
	if !isObject(body) {
		return bodyErr("must be a JSON object")
	}
	if hasDuplicateKeys(body) {
		return bodyErr("must not name a field twice")
	}
	if hasLoneSurrogate(body) {
		return bodyErr(`must not escape half of a UTF-16 surrogate pair alone (such as \ud800)`)
	}
	// encoding/json takes "KIND" or "Account" for kind or account; the
	// contract's names are exact, and whatever checks bodies by them on
	// the way (a gateway's schema) would let such a field through unread.
	if name, ok := inexactName(body, dst); ok {
		if len(name) > maxEchoedField {
			name = "(unknown)"
		}
		return &auth.FieldError{Field: name, Message: "is not a field of this request: field names are case-sensitive"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr) && typeErr.Field != "":
			return &auth.FieldError{Field: typeErr.Field, Message: "must be a string"}
		case strings.HasPrefix(err.Error(), `json: unknown field "`):
			name := strings.TrimSuffix(strings.TrimPrefix(err.Error(), `json: unknown field "`), `"`)
			if len(name) > maxEchoedField || !utf8.ValidString(name) {
				name = name[:0] + "(unknown)"
			}
			return &auth.FieldError{Field: name, Message: "is not a field of this request"}
		case errors.As(err, &typeErr):
			return bodyErr("must be a JSON object")
		default:
			return bodyErr("must be one JSON object")
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return bodyErr("must hold nothing after its JSON object")
	}
	return nil
}
