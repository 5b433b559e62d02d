package auth_test

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// idleClock is a settable clock for the idle tests.
type idleClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *idleClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *idleClock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// signInAt signs email in at the clock's time and returns the session.
func signInAt(t *testing.T, env *xcloaktest.Env, email string) auth.Session {
	t.Helper()
	res, err := env.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: "correct horse battery staple",
		Client: auth.Client{Addr: netip.MustParseAddr("192.0.2.7")}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Session
}

// TestSessionEndsUnusedForItsIdleTime: a session unused for
// XCLOAK_SESSION_IDLE ends, on the account's pages and for forward-auth
// alike, and leaves the account's list; one used within it lasts, but no
// longer than XCLOAK_SESSION_TTL; its uses through forward-auth count.
func TestSessionEndsUnusedForItsIdleTime(t *testing.T) {
	const idle, ttl = 30 * time.Minute, 2 * time.Hour
	clock := &idleClock{now: time.Now().Truncate(time.Second)}
	env := xcloaktest.New(t, xcloaktest.Options{Now: clock.Now, Auth: func(c *auth.Config) {
		c.SessionIdle, c.SessionTTL = idle, ttl
	}})
	env.AddUser(t, "ann@example.com", "correct horse battery staple", false)
	t0 := clock.Now()
	used, unused, proxied := signInAt(t, env, "ann@example.com"), signInAt(t, env, "ann@example.com"), signInAt(t, env, "ann@example.com")
	if !used.EndsAt.Equal(t0.Add(ttl)) || !used.ExpiresAt.Equal(t0.Add(idle+time.Minute)) {
		t.Fatalf("a new session ends +%v and expires +%v; want +%v and +%v (its idle time and the minute its use is noted to)",
			used.EndsAt.Sub(t0), used.ExpiresAt.Sub(t0), ttl, idle+time.Minute)
	}

	// Its last use noted at t0, a session lasts until a minute past the
	// idle time, never less: a use within that minute is not noted.
	clock.set(t0.Add(idle + time.Minute - time.Second))
	got, err := env.Service.Session(t.Context(), used.Token)
	if err != nil {
		t.Fatalf("a session used a second before its idle end: %v", err)
	}
	if want := clock.Now().Add(idle + time.Minute); !got.ExpiresAt.Equal(want) || !got.EndsAt.Equal(t0.Add(ttl)) {
		t.Errorf("used again: expires %v, ends %v; want the idle end moved to %v, the end kept", got.ExpiresAt, got.EndsAt, want)
	}
	clock.set(t0.Add(idle + time.Minute))
	if _, err := env.Service.Session(t.Context(), unused.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("a session unused for its idle time and the minute: %v, want ErrNoSession", err)
	}
	if _, err := env.Service.ProxySession(t.Context(), proxied.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("forward-auth with a session unused for its idle time: %v, want ErrNoSession", err)
	}
	list, err := env.Service.ListSessions(t.Context(), got, auth.Client{Addr: netip.MustParseAddr("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].PublicID != used.PublicID {
		t.Errorf("the account lists %d sessions; want the one in use alone", len(list.Sessions))
	}

	// Used through forward-auth alone every 20 minutes, a session lasts
	// until its TTL, and not a moment more.
	clock.set(t0)
	forward := signInAt(t, env, "ann@example.com")
	for at := 20 * time.Minute; at < ttl; at += 20 * time.Minute {
		clock.set(t0.Add(at))
		if _, err := env.Service.ProxySession(t.Context(), forward.Token); err != nil {
			t.Fatalf("forward-auth at +%v, used every 20 minutes: %v", at, err)
		}
	}
	clock.set(t0.Add(ttl - time.Second))
	if _, err := env.Service.Session(t.Context(), forward.Token); err != nil {
		t.Fatalf("a session in use a second before its TTL: %v", err)
	}
	clock.set(t0.Add(ttl))
	if _, err := env.Service.Session(t.Context(), forward.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("a session in use at its TTL: %v, want ErrNoSession", err)
	}
}

// TestSessionIdleTimeAppliesToSessionsMadeWithout: turned on, the idle
// time ends the sessions made while it was off that have gone unused for
// it, at their next request, rather than counting from that request.
func TestSessionIdleTimeAppliesToSessionsMadeWithout(t *testing.T) {
	clock := &idleClock{now: time.Now().Truncate(time.Second)}
	off := xcloaktest.New(t, xcloaktest.Options{Now: clock.Now, Auth: func(c *auth.Config) { c.SessionIdle = 0 }})
	on := off.Replica(t, xcloaktest.Options{Now: clock.Now, Auth: func(c *auth.Config) { c.SessionIdle = 30 * time.Minute }})
	ann := off.AddUser(t, "ann@example.com", "correct horse battery staple", false)
	t0 := clock.Now()
	stale, fresh := signInAt(t, off, "ann@example.com"), signInAt(t, off, "ann@example.com")
	if !stale.ExpiresAt.Equal(stale.EndsAt) {
		t.Fatalf("without an idle time a session expires %v, ends %v; want the same", stale.ExpiresAt, stale.EndsAt)
	}
	clock.set(t0.Add(3 * time.Hour))
	if _, err := off.Service.Session(t.Context(), stale.Token); err != nil {
		t.Fatalf("unused 3 hours without an idle time: %v", err)
	}
	// Used at +3h, it ends on the replica with the idle time at its idle
	// end (the time and the minute its use is noted to), not a moment after.
	clock.set(t0.Add(3*time.Hour + 31*time.Minute))
	if _, err := on.Service.Session(t.Context(), stale.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("asked of a replica with a 30m idle time at its idle end: %v, want ErrNoSession", err)
	}
	clock.set(t0.Add(6*time.Hour + time.Minute))
	if _, err := on.Service.Session(t.Context(), stale.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("unused 3 hours, then asked of a replica with a 30m idle time: %v, want ErrNoSession", err)
	}
	if _, err := on.Service.Session(t.Context(), fresh.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("unused 6 hours, then asked of a replica with a 30m idle time: %v, want ErrNoSession", err)
	}

	// The account's list shows neither: they sign in no more, whether or
	// not a request has come since.
	// Nor do the administrators count them.
	onlyCurrentListed(t, on.Service, ann.ID, signInAt(t, on, "ann@example.com"))
}

// onlyCurrentListed checks that account id's list of sessions, as current
// reads it, and the administrators' count of them hold current alone.
func onlyCurrentListed(t *testing.T, svc *auth.Service, id int64, current auth.Session) {
	t.Helper()
	list, err := svc.ListSessions(t.Context(), current, auth.Client{Addr: netip.MustParseAddr("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].PublicID != current.PublicID {
		t.Errorf("the account lists %d sessions; want the one in use alone", len(list.Sessions))
	}
	if d, err := svc.UserDetail(t.Context(), id); err != nil || d.Sessions != 1 {
		t.Errorf("the administrators' page counts %d sessions (%v); want the one in use alone", d.Sessions, err)
	}
}

// TestSessionTTLAppliesToSessionsMadeWithALongerOne: a session made while
// XCLOAK_SESSION_TTL was longer lasts no longer than the TTL in force
// after its sign-in, on the account's pages and for forward-auth alike,
// and leaves the account's list and the administrators' count: an
// operator who shortens the TTL after a theft shortens the stolen
// session's life too.
func TestSessionTTLAppliesToSessionsMadeWithALongerOne(t *testing.T) {
	clock := &idleClock{now: time.Now().Truncate(time.Second)}
	long := xcloaktest.New(t, xcloaktest.Options{Now: clock.Now, Auth: func(c *auth.Config) { c.SessionIdle, c.SessionTTL = 0, 400*24*time.Hour }})
	short := long.Replica(t, xcloaktest.Options{Now: clock.Now, Auth: func(c *auth.Config) { c.SessionIdle, c.SessionTTL = 0, 12*time.Hour }})
	ann := long.AddUser(t, "ann@example.com", "correct horse battery staple", false)
	t0 := clock.Now()
	old := signInAt(t, long, "ann@example.com")

	clock.set(t0.Add(11 * time.Hour))
	sess, err := short.Service.Session(t.Context(), old.Token)
	if err != nil {
		t.Fatalf("11 hours after its sign-in, asked of a replica with a 12h TTL: %v", err)
	}
	if want := t0.Add(12 * time.Hour); !sess.EndsAt.Equal(want) || sess.ExpiresAt.After(want) {
		t.Errorf("the session ends %v, expires %v; want both by %v, 12 hours after its sign-in", sess.EndsAt, sess.ExpiresAt, want)
	}

	clock.set(t0.Add(12 * time.Hour))
	if _, err := short.Service.Session(t.Context(), old.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("12 hours after its sign-in, asked of a replica with a 12h TTL: %v, want ErrNoSession", err)
	}
	clock.set(t0.Add(13 * time.Hour))
	if _, err := short.Service.Session(t.Context(), old.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("13 hours after its sign-in, asked of a replica with a 12h TTL: %v, want ErrNoSession", err)
	}
	if _, err := short.Service.ProxySession(t.Context(), old.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("forward-auth 13 hours after its sign-in, with a 12h TTL: %v, want ErrNoSession", err)
	}
	onlyCurrentListed(t, short.Service, ann.ID, signInAt(t, short, "ann@example.com"))
}
