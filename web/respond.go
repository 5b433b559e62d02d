package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/a-h/templ"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/templates"
)

// Errors of the HTTP layer itself.
var (
	errBadRequest  = errors.New("web: malformed request")
	errCrossOrigin = errors.New("web: cross-origin request refused")
	errInternal    = errors.New("web: internal error")
	errNoMatch     = errors.New("web: passwords do not match")
)

// problem is how one error is answered: the status, the JSON error code,
// the sentence a page shows, and, for 429, when to retry.
type problem struct {
	status     int
	code       string
	message    string
	retryAfter int
}

// problemFor maps every error the handlers can meet to its answer. It is
// the one place that decides status codes. Unknown account, wrong password
// and every kind of limit or lockout each share one answer, so that no
// answer tells whether an account exists or is locked.
func problemFor(err error) problem {
	// A sign-in's rejection, what a flood gets, is found without
	// errors.As: a *auth.LimitedError matches none of the cases before its
	// own below.
	if limited, ok := err.(*auth.LimitedError); ok {
		return problem{http.StatusTooManyRequests, "too_many_attempts", "", limited.RetryAfterSeconds()}
	}
	var limited *auth.LimitedError
	var denied *auth.DeniedError
	var field *auth.FieldError
	switch {
	case errors.As(err, &denied):
		// The decision API's refusal; its handler answers it with a
		// decision (attempts.go).
		code := "rate_limited"
		if denied.Locked {
			code = "locked"
		}
		return problem{http.StatusTooManyRequests, code, "", denied.RetryAfterSeconds()}
	case errors.As(err, &field):
		return problem{http.StatusBadRequest, "invalid_request", field.Field + " " + field.Message, 0}
	case errors.Is(err, auth.ErrInvalidAPIKey):
		return problem{http.StatusUnauthorized, "invalid_api_key", "Send a valid API key: Authorization: Bearer xck_...", 0}
	case errors.Is(err, auth.ErrUnknownAttempt):
		return problem{http.StatusNotFound, "unknown_attempt", "No attempt with that id awaits an outcome.", 0}
	case errors.As(err, &limited):
		return problem{http.StatusTooManyRequests, "too_many_attempts", "", limited.RetryAfterSeconds()}
	case errors.Is(err, errTooManyStreams):
		return problem{http.StatusTooManyRequests, "too_many_streams",
			"Too many live dashboards are open in this browser. Close one, then reload this page.", int(streamRetry / time.Second)}
	case errors.Is(err, errTooManyExports):
		return problem{http.StatusTooManyRequests, "too_many_exports",
			"Too many exports are running in this browser. Wait for one to finish, then try again.", int(exportRetry / time.Second)}
	case errors.Is(err, errTooManySearches):
		return problem{http.StatusTooManyRequests, "too_many_searches",
			"Too many event searches and exports are running on this server. Try again in a few seconds.", int(searchRetry / time.Second)}
	case errors.Is(err, errStreamsFull):
		return problem{http.StatusTooManyRequests, "too_many_streams",
			"Too many live dashboards are open on this server. Try again in a minute.", int(streamsFullRetry / time.Second)}
	case errors.Is(err, errSignedOut):
		return problem{http.StatusUnauthorized, "unauthenticated", "Sign in to continue.", 0}
	case errors.Is(err, errUnknownOrigin):
		return problem{http.StatusForbidden, "unknown_origin", "The request to authorise did not come from a trusted proxy.", 0}
	case errors.Is(err, errHostNotProtected):
		return problem{http.StatusForbidden, "host_not_protected", "This host is not protected by XCloak.", 0}
	case errors.Is(err, errCrossSiteFetch):
		return problem{http.StatusForbidden, "cross_site", "Open this page from XCloak itself.", 0}
	case errors.Is(err, errNotAdmin):
		return problem{http.StatusForbidden, "forbidden", "This page is for administrators only.", 0}
	case errors.Is(err, dashboard.ErrInvalidPeriod):
		return problem{http.StatusBadRequest, "invalid_period", "Choose a period of 5m, 1h or 24h.", 0}
	case errors.Is(err, errBadAttackMode):
		return problem{http.StatusBadRequest, "invalid_request", "Choose to switch attack mode on or off.", 0}
	case errors.Is(err, errBadCursor):
		return problem{http.StatusBadRequest, "invalid_request", "That page of events does not exist.", 0}
	case errors.Is(err, errBadActivityPage):
		return problem{http.StatusBadRequest, "invalid_request", "Ask for 1 to 50 entries, from a cursor a previous page gave.", 0}
	case errors.Is(err, auth.ErrVerificationRequired):
		// Handlers that sign in answer it with a page or body of their own
		// (held in verify.go); this is its status anywhere else.
		return problem{http.StatusAccepted, "verification_required", "", 0}
	case errors.Is(err, auth.ErrInvalidCode):
		return problem{http.StatusUnauthorized, "invalid_code", templates.MFAWrongCodeText, 0}
	case errors.Is(err, auth.ErrPasskeyNeedsPassword):
		return problem{http.StatusUnauthorized, "passkey_needs_password",
			"Your password was changed. Sign in with it once and use this passkey as the second step; then it signs you in alone again.", 0}
	case errors.Is(err, auth.ErrInvalidPasskey):
		return problem{http.StatusUnauthorized, "invalid_passkey", "That passkey was not accepted. Try again, or sign in another way.", 0}
	case errors.Is(err, auth.ErrPasskeyExists):
		return problem{http.StatusConflict, "passkey_exists", "That passkey is registered already.", 0}
	case errors.Is(err, auth.ErrTooManyFactors):
		return problem{http.StatusConflict, "too_many_factors",
			"Your account has " + strconv.Itoa(auth.MaxFactors) + " second factors, the most it may have. Remove one you no longer use first.", 0}
	case errors.Is(err, auth.ErrPasskeysOff):
		return problem{http.StatusNotFound, "passkeys_off", "Passkeys are not available on this server. Sign in with your password.", 0}
	case errors.Is(err, auth.ErrNoFactor):
		return problem{http.StatusNotFound, "not_found", "That factor is not listed for your account any more.", 0}
	case errors.Is(err, auth.ErrFactorRequired):
		return problem{http.StatusForbidden, "mfa_enrolment_required", "Set up a second factor to continue.", 0}
	case errors.Is(err, auth.ErrInvalidCredentials):
		return problem{http.StatusUnauthorized, "invalid_credentials", "Email or password is incorrect.", 0}
	case errors.Is(err, auth.ErrInvalidToken):
		return problem{http.StatusBadRequest, "invalid_token", templates.ResetInvalidText, 0}
	case errors.Is(err, auth.ErrWeakPassword):
		return problem{http.StatusBadRequest, "invalid_password", fmt.Sprintf("Choose a password of at least %d characters and at most %d bytes.", auth.MinPasswordRunes, auth.MaxPasswordBytes), 0}
	case errors.Is(err, auth.ErrSamePassword):
		return problem{http.StatusBadRequest, "same_password", "Choose a new password that differs from the current one.", 0}
	case errors.Is(err, auth.ErrBreachedPassword):
		return problem{http.StatusBadRequest, "breached_password", "This password has appeared in a data breach; choose another one.", 0}
	case errors.Is(err, auth.ErrNoUser):
		// Only administrators' pages name accounts by id; nothing a
		// visitor sends reaches here with it.
		return problem{http.StatusNotFound, "not_found", "No account has that id.", 0}
	case errors.Is(err, auth.ErrLastAdmin):
		return problem{http.StatusConflict, "last_admin", "That would leave no enabled administrator.", 0}
	case errors.Is(err, auth.ErrUserDisabled):
		return problem{http.StatusConflict, "user_disabled", "The account is disabled.", 0}
	case errors.Is(err, auth.ErrNotListed):
		return problem{http.StatusNotFound, "not_found", "That session or device is not listed for your account any more.", 0}
	case errors.Is(err, errPasswordChangeRequired):
		return problem{http.StatusForbidden, "password_change_required", "Change your password to continue.", 0}
	case errors.Is(err, auth.ErrNoSession):
		return problem{http.StatusUnauthorized, "unauthenticated", "Sign in to continue.", 0}
	case errors.Is(err, errNoMatch):
		return problem{http.StatusBadRequest, "invalid_request", "The two passwords do not match.", 0}
	case errors.Is(err, auth.ErrInvalidRequest), errors.Is(err, auth.ErrInvalidEmail), errors.Is(err, errBadRequest):
		return problem{http.StatusBadRequest, "invalid_request", "Enter a valid email address and password.", 0}
	case errors.Is(err, errCrossOrigin):
		return problem{http.StatusForbidden, "cross_origin_request", "This form was sent from another site and was refused.", 0}
	case errors.Is(err, auth.ErrUnavailable), errors.Is(err, auth.ErrHasherBusy):
		return problem{http.StatusServiceUnavailable, "unavailable", "XCloak cannot answer right now. Try again in a moment.", 0}
	default:
		return problem{http.StatusInternalServerError, "internal_error", "Something went wrong on our side.", 0}
	}
}

// statusClientClosed is the status of a request whose client went away
// before it was answered, as nginx records one: no answer reaches anyone.
const statusClientClosed = 499

// problemOf is problemFor, but for a request whose client hung up while
// it was served (its context cancelled, and err that cancellation): its
// own status, which is no failure of the service's, so that a flood's
// clients closing their connections write no ERROR lines.
func problemOf(r *http.Request, err error) problem {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return problem{statusClientClosed, "client_closed_request", "", 0}
	}
	return problemFor(err)
}

// logProblem records errors that are the service's fault, not the client's.
func (s *Server) logProblem(r *http.Request, p problem, err error) {
	if p.status >= 500 {
		s.log.Error("request failed", "method", loggableMethod(r.Method), "path", loggablePath(r.URL.Path), "status", p.status, "err", err)
	}
}

// retryAfterValues are the Retry-After header's values of 0 to
// maxSharedRetryAfter seconds, each one slice that every answer shares
// (net/http only reads it), so that a flood's 429s allocate none.
var retryAfterValues = func() [][]string {
	// One array holds every value; each slice's capacity is its length,
	// so that an append to one (Header.Add) copies it rather than writing
	// into its neighbour.
	all := make([]string, maxSharedRetryAfter+1)
	v := make([][]string, len(all))
	for i := range all {
		all[i] = strconv.Itoa(i)
		v[i] = all[i : i+1 : i+1]
	}
	return v
}()

// maxSharedRetryAfter is the longest Retry-After in retryAfterValues:
// the default limits' windows and lockouts are within it.
const maxSharedRetryAfter = 3600

// setRetryAfter adds the Retry-After header a 429 or 503 carries. The
// key is in canonical form, as Header.Set would write it.
func setRetryAfter(w http.ResponseWriter, p problem) {
	switch {
	case p.retryAfter > maxSharedRetryAfter:
		w.Header()["Retry-After"] = []string{strconv.Itoa(p.retryAfter)}
	case p.retryAfter > 0:
		w.Header()["Retry-After"] = retryAfterValues[p.retryAfter]
	case p.status == http.StatusServiceUnavailable:
		w.Header()["Retry-After"] = retryAfterValues[1]
	}
}

// failJSON answers an API request with {"error": code} (and
// retry_after_seconds for 429).
func (s *Server) failJSON(w http.ResponseWriter, r *http.Request, err error) {
	p := problemOf(r, err)
	s.logProblem(r, p, err)
	setRetryAfter(w, p)
	// The decision API names the field at fault, and says what is wrong
	// with it.
	if field := fieldError(p, err); field != nil {
		body := map[string]any{"error": p.code, "field": field.Field, "message": p.message}
		if p.retryAfter > 0 {
			body["retry_after_seconds"] = p.retryAfter
		}
		writeJSON(w, p.status, body)
		return
	}
	// Every other error's body is its code and a retry-after, written
	// without encoding/json into a reused buffer: a flood of rejections
	// gets nothing else.
	buf := problemBuffers.Get().(*[]byte)
	*buf = appendProblemJSON((*buf)[:0], p)
	// Write copies the body into the connection's buffer, or sends it,
	// before it returns: the buffer may be reused after.
	writeJSONBytes(w, p.status, *buf)
	problemBuffers.Put(buf)
}

// fieldError is err's *auth.FieldError, nil if none. A rejection
// (too_many_attempts) is never a field's error: problemFor looks for one
// first. It is a function of its own so that a rejection's answer does
// not allocate the variable errors.As fills.
func fieldError(p problem, err error) *auth.FieldError {
	if p.code == "too_many_attempts" {
		return nil
	}
	var field *auth.FieldError
	if errors.As(err, &field) {
		return field
	}
	return nil
}

// problemBuffers hold problem bodies while they are written.
var problemBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64); return &b }}

// problemJSON is {"error": code} with retry_after_seconds when p has one,
// byte for byte as encoding/json writes it (TestProblemJSON).
func problemJSON(p problem) []byte {
	return appendProblemJSON(make([]byte, 0, 64), p)
}

// appendProblemJSON appends problemJSON(p) to b.
func appendProblemJSON(b []byte, p problem) []byte {
	b = append(b, `{"error":`...)
	if plainProblemCode(p.code) {
		b = append(b, '"')
		b = append(b, p.code...)
		b = append(b, '"')
	} else {
		// Escaped as encoding/json escapes it, HTML's <, > and & too.
		j, _ := json.Marshal(p.code)
		b = append(b, j...)
	}
	if p.retryAfter > 0 {
		b = append(b, `,"retry_after_seconds":`...)
		b = strconv.AppendInt(b, int64(p.retryAfter), 10)
	}
	return append(b, "}\n"...)
}

// plainProblemCode reports whether encoding/json writes code as itself
// between quotes: no byte a JSON string escapes, nor the <, > and & it
// escapes for HTML.
func plainProblemCode(code string) bool {
	return plainJSONName(code) && !strings.ContainsAny(code, "<>&")
}

// fail answers a request that has no page of its own to show the error on:
// JSON for the API, a plain error page otherwise. It is the one renderer of
// errors for every route, the administrators' ones included.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.failAs(w, r, nil, err)
}

// failAs is fail for a handler that has looked the visitor up already:
// nav, unless nil, is the page's header, so that an error page (the
// database down, say) costs no second lookup of the session.
func (s *Server) failAs(w http.ResponseWriter, r *http.Request, nav *templates.Nav, err error) {
	if isAPI(r) {
		s.failJSON(w, r, err)
		return
	}
	p := problemOf(r, err)
	s.logProblem(r, p, err)
	setRetryAfter(w, p)
	// A limit's answer says when to retry; a refusal with a reason of its
	// own (too many dashboard streams) keeps it.
	message := p.message
	if message == "" && p.retryAfter > 0 {
		message = templates.RetryText(p.retryAfter)
	}
	if nav == nil {
		v := s.nav(r)
		nav = &v
	}
	s.render(w, r, p.status, templates.ErrorPage(templates.ErrorProps{Nav: *nav, Status: p.status, Message: message,
		Continue: continueTo(r, err)}))
}

// continueTo is, for a page another site's script opened (a mailed link
// through a redirector that sends the browser on by script, not by an
// HTTP redirect, say), the page's own path, for the user to open by a
// click of their own, which is then this site's navigation and passes
// (userFetch); "" for any other refusal. Nothing is counted until then.
// Never the export or the stream, which no link from elsewhere opens
// (linkable): a click on this page would open them as this site's own.
func continueTo(r *http.Request, err error) string {
	if !errors.Is(err, errCrossSiteFetch) || r.Method != http.MethodGet || r.Header.Get("Sec-Fetch-Dest") != "document" || !linkable(r) {
		return ""
	}
	// Only a path of this site: never one a browser would take for
	// another host's (//host, /\host).
	u := r.URL.RequestURI()
	if !strings.HasPrefix(u, "/") || strings.HasPrefix(u, "//") || strings.HasPrefix(u, "/\\") {
		return ""
	}
	return withoutNotices(u)
}

// ownRedirectParams are the query parameters by which XCloak's own forms'
// redirects ask the page they lead to for a notice, which the page shows
// only then (ownRedirect). Neither a continue link nor rd carries them.
var ownRedirectParams = []string{"notice", "password", "session", "sessions", "device", "factor", "reset", "unlock"}

// withoutNotices is u, a path and query, without ownRedirectParams: the
// link to go on is clicked on XCloak's page, so the page it opens is
// XCloak's own navigation, and would otherwise confirm, in the notice of
// a URL another site chose, an act nobody did ("Attack mode is off",
// "Every other session was ended"). A query that does not parse is left
// out whole. The other parameters stay as written, in their order: rd,
// which the sign-in form posts back, must be allowed again unchanged, and
// re-encoded it could grow (a quote to %27) past the length rd may have.
func withoutNotices(u string) string {
	path, query, ok := strings.Cut(u, "?")
	if !ok {
		return u
	}
	if _, err := url.ParseQuery(query); err != nil {
		return path
	}
	var kept []string
	found := false
	for pair := range strings.SplitSeq(query, "&") {
		// Read as url.ParseQuery reads it, which the pages ask.
		key, _, _ := strings.Cut(pair, "=")
		if name, err := url.QueryUnescape(key); err == nil && slices.Contains(ownRedirectParams, name) {
			found = true
			continue
		}
		if pair != "" {
			kept = append(kept, pair)
		}
	}
	switch {
	case !found:
		return u
	case len(kept) == 0:
		return path
	}
	return path + "?" + strings.Join(kept, "&")
}

func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// jsonContentType is the Content-Type of every JSON answer, one slice
// for them all: net/http only reads it, and a handler that changes the
// header replaces it.
var jsonContentType = []string{"application/json"}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeJSONBytes is writeJSON for a body encoded already.
func writeJSONBytes(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// pageBuffers hold pages while they render: a page is a few kilobytes,
// which a new buffer would reach by growing and copying half a dozen
// times on every request, a rejected sign-in's page included.
var pageBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledPage bounds the buffers kept for reuse, so that one large page
// (an administrator's list) is not held for every later one.
const maxPooledPage = 64 << 10

// htmlContentType is the Content-Type of every page, shared as
// jsonContentType is.
var htmlContentType = []string{"text/html; charset=utf-8"}

// render writes a page with a status.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	buf := pageBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledPage {
			// What a page shows once (new recovery codes, a form's
			// token) is left in no buffer kept for the next request.
			clear(buf.Bytes())
			pageBuffers.Put(buf)
		}
	}()
	if err := c.Render(r.Context(), buf); err != nil {
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			// The client hung up (templ stops at a cancelled context): no
			// page reaches anyone, and nothing of the service's failed.
			w.WriteHeader(statusClientClosed)
			return
		}
		s.log.Error("rendering page", "path", loggablePath(r.URL.Path), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header()["Content-Type"] = htmlContentType
	w.WriteHeader(status)
	// Write copies the page into the connection's buffer, or sends it,
	// before it returns: the buffer may be reused after.
	_, _ = w.Write(buf.Bytes())
}

// maxFieldBytes bounds any single form or JSON field. Longer legitimate
// values do not exist: it is above auth.MaxEmailBytes and
// auth.MaxPasswordBytes, and a test keeps it so.
const maxFieldBytes = 2048

// checkField refuses what no field may hold: invalid UTF-8, NUL bytes,
// oversize values.
func checkField(v string) error {
	if len(v) > maxFieldBytes || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		return errBadRequest
	}
	return nil
}

func hasContentType(r *http.Request, want string) bool {
	// Content-Type is one value (RFC 9110, 8.3): a request with two is
	// refused, as whatever reads the body on the way (a gateway's schema,
	// a filter) may take the other one, and check the body as a type this
	// service does not read it as.
	v := r.Header["Content-Type"]
	if len(v) != 1 || !unencodedBody(r) {
		return false
	}
	// The common header, the media type alone, needs no parsing (whose
	// parameters' map a flood would pay for on every request).
	if v[0] == want {
		return true
	}
	mt, params, err := mime.ParseMediaType(v[0])
	if err != nil || mt != want {
		return false
	}
	// Every body is read as UTF-8. One that names another charset is
	// refused rather than read as UTF-8 all the same: whatever reads it
	// on the way would decode it by its charset (an ASCII body in UTF-7,
	// Latin-1 that happens to be valid UTF-8) and check another body than
	// the one the service acts on. "utf8" is a common spelling of it.
	charset, named := params["charset"]
	return !named || strings.EqualFold(charset, "utf-8") || strings.EqualFold(charset, "utf8")
}

// unencodedBody reports whether r's body is sent as itself: no
// Content-Encoding, or identity. The service decodes none, and a body
// that says it is compressed is not read as if it were not, since
// whatever reads it on the way would decompress it, or fail to, and check
// another body than the one the service acts on.
func unencodedBody(r *http.Request) bool {
	v := r.Header["Content-Encoding"]
	return len(v) == 0 || len(v) == 1 && strings.EqualFold(strings.TrimSpace(v[0]), "identity")
}

// decodeForm reads the named fields of an urlencoded form. Each may appear
// at most once; absent fields are "".
func decodeForm(r *http.Request, names ...string) (map[string]string, error) {
	if !hasContentType(r, "application/x-www-form-urlencoded") {
		return nil, errBadRequest
	}
	if err := r.ParseForm(); err != nil {
		return nil, errBadRequest
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		vals := r.PostForm[name]
		if len(vals) > 1 {
			return nil, errBadRequest
		}
		if len(vals) == 1 {
			if err := checkField(vals[0]); err != nil {
				return nil, err
			}
			out[name] = vals[0]
		}
	}
	return out, nil
}

// decodeJSON reads exactly one JSON object of string fields into dst: a
// pointer to a struct of strings. Unknown fields, a key given twice,
// trailing data, invalid UTF-8 (which encoding/json would silently
// replace) and NUL bytes are refused.
func decodeJSON[T any](r *http.Request, dst *T, fields ...*string) error {
	if !hasContentType(r, "application/json") {
		return errBadRequest
	}
	buf, err := readBody(r)
	if err != nil {
		return errBadRequest
	}
	// Both decoders below copy what they keep out of the body, so its
	// buffer may be reused once they return.
	defer putBody(buf)
	body := buf.Bytes()
	if !utf8.Valid(body) {
		return errBadRequest
	}
	// The common body (a sign-in's two strings) needs neither the search
	// for duplicate keys nor encoding/json's reflection (flatjson.go).
	if !decodeFlatInto(body, dst) {
		// Decoded into a value of its own, then copied: dst handed to
		// encoding/json would put every caller's struct on the heap, for
		// the common body too.
		var v T
		if err := decodeStrict(body, &v); err != nil {
			return err
		}
		*dst = v
	}
	return checkFields(fields)
}

// bodyBuffers hold JSON bodies while they are decoded; maxPooledBody
// bounds the ones kept, so that one large body is not held for every
// later one.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 16 << 10

// readBody reads r's body whole into a buffer of bodyBuffers, which the
// caller gives back with putBody once nothing reads it. On error the
// buffer is given back already.
func readBody(r *http.Request) (*bytes.Buffer, error) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	if _, err := buf.ReadFrom(r.Body); err != nil {
		putBody(buf)
		return nil, err
	}
	return buf, nil
}

// putBody gives buf back to bodyBuffers, cleared: no password is left
// behind in the pool, since the body was all read into the buffer, which
// nothing consumed.
func putBody(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBody {
		clear(buf.Bytes())
		bodyBuffers.Put(buf)
	}
}

// decodeStrict decodes the JSON text body, valid UTF-8, into dst with
// encoding/json, refusing duplicate keys, lone surrogates, names in
// another case than the fields', unknown fields and trailing data.
func decodeStrict(body []byte, dst any) error {
	if !isObject(body) || hasDuplicateKeys(body) || hasLoneSurrogate(body) {
		return errBadRequest
	}
	// encoding/json takes "EMAIL" for email; the contract's names are
	// exact (inexactName).
	if _, ok := inexactName(body, dst); ok {
		return errBadRequest
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return errBadRequest
	}
	if _, err := dec.Token(); err != io.EOF {
		return errBadRequest
	}
	return nil
}

// isObject reports whether the JSON text body begins as an object does.
// encoding/json decodes null into a struct as nothing at all, as it
// would {}: a body of null would be taken for one whose fields are all
// empty (a link's token not found, an unknown kind) rather than refused
// as the one object every body must be. Any other value that is no
// object, encoding/json refuses itself.
func isObject(body []byte) bool {
	i := skipSpace(body, 0)
	return i < len(body) && body[i] == '{'
}

// hasLoneSurrogate reports whether the JSON text data escapes a UTF-16
// surrogate that is not half of a pair (a \uD800-\uDBFF escape followed
// at once by a \uDC00-\uDFFF one). encoding/json silently reads each as
// U+FFFD, as it would invalid UTF-8, so two different passwords or
// emails would be read as one. A backslash is only ever an escape in
// JSON text, so the scan need not know where strings begin.
func hasLoneSurrogate(data []byte) bool {
	for i := bytes.IndexByte(data, '\\'); i >= 0 && i+1 < len(data); {
		high := false
		if data[i+1] == 'u' {
			r, ok := escapedUnit(data, i)
			switch {
			case ok && utf16.IsSurrogate(r) && r < 0xdc00:
				next, ok := escapedUnit(data, i+6)
				if !ok || next < 0xdc00 || next > 0xdfff {
					return true
				}
				i += 12
				high = true
			case ok && utf16.IsSurrogate(r):
				return true
			}
		}
		if !high {
			i += 2
		}
		j := bytes.IndexByte(data[min(i, len(data)):], '\\')
		if j < 0 {
			return false
		}
		i += j
	}
	return false
}

// escapedUnit reads the \uXXXX escape at data[i:], if there is one.
func escapedUnit(data []byte, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range data[i+2 : i+6] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// checkFields checks each of fields with checkField.
func checkFields(fields []*string) error {
	for _, f := range fields {
		if err := checkField(*f); err != nil {
			return err
		}
	}
	return nil
}

// foldKey maps every rune of key to the least rune it folds to, so that
// two keys encoding/json would match to one field (it folds Unicode, so
// "paſſword", with the long s, is "password", and the Kelvin sign is "k")
// fold alike.
func foldKey(key string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, key)
}

// hasDuplicateKeys reports whether any object in the JSON text data, at
// any depth, names a key twice. Keys are compared as encoding/json matches
// them to fields, after unescaping and without regard to case, since it
// silently keeps the last of two: a request whose reader could take either
// value is refused instead. Text that is not JSON reports false and is left
// to the decoder to refuse.
func hasDuplicateKeys(data []byte) bool {
	// One frame per open object or array, the innermost last.
	type frame struct {
		keys    map[string]bool // nil for an array
		wantKey bool            // an object's next token is a key
	}
	var open []*frame
	// valueDone notes that a value ended: in an object, a key comes next.
	valueDone := func(open []*frame) {
		if len(open) > 0 && open[len(open)-1].keys != nil {
			open[len(open)-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(open) > 0 {
			top = open[len(open)-1]
		}
		if top != nil && top.wantKey {
			key, ok := tok.(string)
			if !ok { // the object's closing brace
				open = open[:len(open)-1]
				valueDone(open)
				continue
			}
			key = foldKey(key)
			if top.keys[key] {
				return true
			}
			top.keys[key] = true
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			open = append(open, &frame{keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			open = append(open, &frame{})
		case json.Delim(']'):
			open = open[:len(open)-1]
			valueDone(open)
		default: // a scalar value
			valueDone(open)
		}
	}
}
