package main

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/xcloak/xcloak/client"
)

// App is a web application with its own users, whose passwords it checks
// itself, that asks XCloak whether each sign-in may go ahead.
type App struct {
	xc  *client.Client
	log *slog.Logger
	// users maps a lower-case email to its password's bcrypt hash.
	users map[string][]byte
	// dummy is compared for an unknown email, so that it costs what a
	// known one costs.
	dummy []byte
	// compare checks a password against a hash; tests count its calls.
	compare func(hash, password []byte) error
	// trusted are the proxies whose X-Forwarded-For is believed.
	trusted []netip.Prefix
	secure  bool
	// now is the clock sessions end by; tests set it.
	now func() time.Time

	mu       sync.Mutex
	sessions map[string]session // by token
}

// session is a signed-in browser's.
type session struct {
	email string
	// ends is when the session's cookie expires: the server ends it then
	// too, or a cookie kept past its Max-Age, or copied, would sign in
	// for ever.
	ends time.Time
}

// sessionTTL is how long a session lasts.
const sessionTTL = 12 * time.Hour

// Config is what an App is made of.
type Config struct {
	// XCloak is the decision API's client.
	XCloak *client.Client
	// Users maps emails to passwords; they are hashed at once.
	Users map[string]string
	// BcryptCost is the cost of the password hashes; 0 is bcrypt's default.
	BcryptCost int
	// TrustedProxies are the reverse proxies in front of the app whose
	// X-Forwarded-For names the client. Empty: the connection's peer is
	// the client, and the header is ignored.
	TrustedProxies []netip.Prefix
	// InsecureCookies sends cookies without Secure, for plain http.
	InsecureCookies bool
	Log             *slog.Logger
}

// NewApp hashes the users' passwords and returns the app.
func NewApp(cfg Config) (*App, error) {
	cost := cfg.BcryptCost
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	a := &App{
		xc: cfg.XCloak, log: cfg.Log, users: map[string][]byte{}, compare: bcrypt.CompareHashAndPassword,
		trusted: cfg.TrustedProxies, secure: !cfg.InsecureCookies, now: time.Now, sessions: map[string]session{},
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if a.dummy, err = bcrypt.GenerateFromPassword([]byte(randomID()), cost); err != nil {
		return nil, err
	}
	for email, password := range cfg.Users {
		if a.users[strings.ToLower(email)], err = bcrypt.GenerateFromPassword([]byte(password), cost); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Handler serves the app's pages.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.handleHome)
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) { a.page(w, http.StatusOK, page{}) })
	mux.HandleFunc("POST /login", a.handleLogin)
	mux.HandleFunc("POST /logout", a.handleLogout)
	// Another site's page must not post the forms from a visitor's
	// browser: a sign-in to an account of its choosing, a sign-out, or
	// guesses spread over its visitors' addresses, each a network of its
	// own to XCloak.
	return http.MaxBytesHandler(http.NewCrossOriginProtection().Handler(mux), 16<<10)
}

// handleLogin is the sign-in protected by XCloak: ask, check, report.
func (a *App) handleLogin(w http.ResponseWriter, r *http.Request) {
	email, password := r.PostFormValue("email"), r.PostFormValue("password")

	// Ask XCloak first: a denied attempt costs no password hash. The
	// account as this app looks it up (lower case), the same way every
	// time: XCloak keeps known devices for the account as sent.
	d, err := a.xc.Attempt(r.Context(), client.AttemptRequest{
		Kind: client.Login, Account: strings.ToLower(email), ClientIP: a.clientIP(r), Device: a.device(w, r)})
	var bad *client.RequestError
	switch {
	case errors.As(err, &bad):
		a.page(w, http.StatusBadRequest, page{Email: email, Error: "Enter your email and password."})
		return
	case err != nil:
		// This app refuses sign-ins while XCloak cannot be asked. An app
		// that would rather stay open lets them through here, and only
		// when errors.Is(err, client.ErrUnavailable): any other error is
		// a refusal, which must not open the door.
		a.log.Error("asking XCloak", "err", err)
		a.page(w, http.StatusServiceUnavailable, page{Email: email, Error: "Signing in is unavailable right now. Try again in a moment."})
		return
	case d.Kind == client.Deny:
		// One answer for a limit and a lockout: neither is told apart.
		secs := int((d.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		a.page(w, http.StatusTooManyRequests, page{Email: email, Error: "Too many attempts. Try again in " + (time.Duration(secs) * time.Second).String() + "."})
		return
	}

	// Check the password, and tell XCloak how it went: even if the
	// browser has hung up meanwhile (the client's timeout still bounds the
	// call), or a guess that hangs up in time would never count.
	ok := a.checkPassword(email, password)
	if err := a.xc.Outcome(context.WithoutCancel(r.Context()), d.AttemptID, client.ResultOf(ok)); err != nil {
		a.log.Warn("reporting the outcome to XCloak", "err", err)
	}
	switch {
	case d.Kind == client.Challenge:
		// XCloak would verify this new browser itself: verify the user
		// another way (a mailed link, a second factor) before a session,
		// and answer a wrong password the same, or this page tells a
		// stuffing run which of its passwords are right.
		a.page(w, http.StatusAccepted, page{Verify: true})
	case !ok:
		a.page(w, http.StatusUnauthorized, page{Email: email, Error: "Email or password is incorrect."})
	default:
		a.startSession(w, strings.ToLower(email))
		http.Redirect(w, r, "/", http.StatusSeeOther)
	}
}

// checkPassword reports whether password is email's; an unknown email
// costs one comparison too.
func (a *App) checkPassword(email, password string) bool {
	hash, known := a.users[strings.ToLower(email)]
	if !known {
		hash = a.dummy
	}
	return a.compare(hash, []byte(password)) == nil && known
}

const (
	deviceCookie  = "ownusers_device"
	sessionCookie = "ownusers_session"
)

// device returns the browser's device id from its long-lived cookie,
// giving it one when it has none. XCloak limits a device that signed in to
// an account before on its own, and never challenges it.
func (a *App) device(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(deviceCookie); err == nil && isID(c.Value) {
		return c.Value
	}
	id := randomID()
	a.setCookie(w, deviceCookie, id, 365*24*time.Hour)
	return id
}

func (a *App) startSession(w http.ResponseWriter, email string) {
	token := randomID()
	now := a.now()
	a.mu.Lock()
	// The ended sessions go here, so that those no browser sends again
	// do not pile up: a walk of the map, which an example's few users
	// keep short.
	for t, s := range a.sessions {
		if !now.Before(s.ends) {
			delete(a.sessions, t)
		}
	}
	a.sessions[token] = session{email: email, ends: now.Add(sessionTTL)}
	a.mu.Unlock()
	a.setCookie(w, sessionCookie, token, sessionTTL)
}

// session returns the signed-in email, "" for none.
func (a *App) session(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[c.Value]
	if !ok || !a.now().Before(s.ends) {
		delete(a.sessions, c.Value)
		return ""
	}
	return s.email
}

func (a *App) handleHome(w http.ResponseWriter, r *http.Request) {
	email := a.session(r)
	if email == "" {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	a.page(w, http.StatusOK, page{SignedIn: email})
}

func (a *App) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		a.mu.Lock()
		delete(a.sessions, c.Value)
		a.mu.Unlock()
	}
	a.setCookie(w, sessionCookie, "", removeCookie)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// removeCookie, as setCookie's maxAge, has the browser drop the cookie.
const removeCookie time.Duration = -1

// setCookie sets a cookie for maxAge, or removes it (removeCookie).
func (a *App) setCookie(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	// http.Cookie's MaxAge 0 sends no Max-Age at all, a cookie kept until
	// the browser closes; a negative one sends Max-Age=0, which removes it.
	seconds := int(maxAge / time.Second)
	if maxAge < 0 {
		seconds = -1
	}
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: seconds,
		HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteLaxMode})
}

// randomID is a session token or a device id: crypto/rand's Text, 26
// base32 characters, at least 128 random bits.
func randomID() string { return rand.Text() }

// isID reports whether s is shaped like a randomID; a cookie that is not
// is replaced.
func isID(s string) bool {
	if len(s) != 26 {
		return false
	}
	for _, c := range s {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}
