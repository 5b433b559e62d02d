package auth_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// oldReplicaSession stores a session under token as a replica of the
// version before tagged tokens does during a rolling upgrade: it knows
// nothing of legacy_token, which its default marks.
func oldReplicaSession(t *testing.T, env *xcloaktest.Env, userID int64, token string, at time.Time) {
	t.Helper()
	if _, err := env.DB.Exec(t.Context(), `
		INSERT INTO sessions (id_hash, user_id, created_at, expires_at, last_seen_at, public_id, ends_at)
		VALUES ($1, $2, $3, $4, $3, 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee', $4)`,
		auth.HashToken(token), userID, at, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// learnedNoneLive is a service on a clock of the test's, with ann's
// account, that has learned that no session of the older shape is live.
func learnedNoneLive(t *testing.T) (*xcloaktest.Env, *idleClock, auth.User) {
	t.Helper()
	clock := &idleClock{now: time.Now().Truncate(time.Second)}
	env := xcloaktest.New(t, xcloaktest.Options{Now: clock.Now})
	ann := env.AddUser(t, "ann@example.com", "correct horse battery staple", false)
	if _, err := env.Service.Session(t.Context(), strings.Repeat("A", 43)); !errors.Is(err, auth.ErrNoSession) {
		t.Fatal(err)
	}
	return env, clock, ann
}

// TestLegacyAnswerLapsesWhenTheClockGoesBack: the answer that no session
// of the older shape is live is asked again a minute of the replica's
// time later, even when its clock was set back meanwhile; it is not kept
// until the clock passes the time it was asked at again.
func TestLegacyAnswerLapsesWhenTheClockGoesBack(t *testing.T) {
	env, clock, ann := learnedNoneLive(t)
	start := clock.Now()
	// The clock is set back an hour (NTP stepping a fast clock), and an
	// old replica signs ann in.
	clock.set(start.Add(-time.Hour))
	const old = "oldoldoldoldoldoldoldoldoldoldoldoldoldoldo"
	oldReplicaSession(t, env, ann.ID, old, clock.Now())
	// Two minutes of this replica's time on, the answer has lapsed.
	clock.set(start.Add(-time.Hour + 2*time.Minute))
	if sess, err := env.Service.Session(t.Context(), old); err != nil || sess.UserID != ann.ID {
		t.Fatalf("a session an old replica made, two minutes after the clock went back: %+v, %v; want ann's", sess, err)
	}
}

// TestLegacySignOutWhileAnOldReplicaServes: during a rolling upgrade, a
// session an old replica made after this one learned that none of the
// older shape was live is ended when its browser signs out here, not left
// live for whoever holds a copy of its cookie.
func TestLegacySignOutWhileAnOldReplicaServes(t *testing.T) {
	env, clock, ann := learnedNoneLive(t)
	start := clock.Now()
	const old = "oldoldoldoldoldoldoldoldoldoldoldoldoldoldo"
	oldReplicaSession(t, env, ann.ID, old, clock.Now())
	clock.set(start.Add(10 * time.Second))
	if err := env.Service.Logout(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	clock.set(start.Add(2 * time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if sess, err := env.Service.Session(ctx, old); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("a session signed out on this replica: %+v, %v; want ErrNoSession", sess, err)
	}
}

// TestLegacyRecheckFailureIsNotRetriedAtOnce: a recheck that fails (the
// table busy, Postgres slow, the client gone) stands for a while like an
// answer, so that a flood of tokens of the older shape does not turn into
// one recheck after another.
func TestLegacyRecheckFailureIsNotRetriedAtOnce(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	clock := &idleClock{now: start}
	env := xcloaktest.New(t, xcloaktest.Options{Now: clock.Now})
	made := strings.Repeat("A", 43)
	if _, err := env.Service.Session(t.Context(), made); !errors.Is(err, auth.ErrNoSession) {
		t.Fatal(err)
	}
	clock.set(start.Add(time.Minute + time.Second))
	lockSessions(t, env)
	// The recheck waits for the table until its request gives up.
	first, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := env.Service.Session(first, made); !errors.Is(err, auth.ErrNoSession) {
		t.Fatal(err)
	}
	if first.Err() == nil {
		t.Fatal("the recheck did not wait for the table")
	}
	// The next token of that shape, at the same time, asks nothing: a
	// recheck would wait for the table past this context's second.
	next, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := env.Service.Session(next, made); !errors.Is(err, auth.ErrNoSession) || next.Err() != nil {
		t.Errorf("a token of the older shape right after a failed recheck: %v (context %v); want ErrNoSession without a query",
			err, next.Err())
	}
	// Nor does a sign-out, which asks sooner than a page does.
	if err := env.Service.Logout(next, made); err != nil || next.Err() != nil {
		t.Errorf("a sign-out with a token of the older shape right after a failed recheck: %v (context %v); want nothing done",
			err, next.Err())
	}
}

// TestSessionsMarkTheirTokensShape: a session this version makes, by a
// sign-in or by a password change's new token, is stored unmarked with a
// tagged token; one an earlier version stores is marked by the column's
// default; a change made from a marked session goes on unmarked.
func TestSessionsMarkTheirTokensShape(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	ann := env.AddUser(t, "ann@example.com", "correct horse battery staple", false)
	marked := func(token string) bool {
		t.Helper()
		var legacy bool
		if err := env.DB.QueryRow(t.Context(), `SELECT legacy_token FROM sessions WHERE id_hash = $1`, auth.HashToken(token)).Scan(&legacy); err != nil {
			t.Fatal(err)
		}
		return legacy
	}
	signedIn := signInAt(t, env, "ann@example.com").Token
	if len(signedIn) != 64 || marked(signedIn) {
		t.Errorf("a sign-in's token %q (%d characters) is marked %v; want 64 characters, unmarked", signedIn, len(signedIn), marked(signedIn))
	}
	const old = "oldoldoldoldoldoldoldoldoldoldoldoldoldoldo"
	oldReplicaSession(t, env, ann.ID, old, time.Now())
	if !marked(old) {
		t.Fatal("a session an earlier version stored is not marked")
	}
	changed, err := env.Service.ChangePassword(t.Context(), auth.PasswordChange{Session: old, Current: "correct horse battery staple",
		New: "another horse battery staple", Client: auth.Client{Addr: netip.MustParseAddr("192.0.2.7")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed.Token) != 64 || marked(changed.Token) {
		t.Errorf("the token a change made from a marked session goes on under (%d characters) is marked %v; want 64, unmarked",
			len(changed.Token), marked(changed.Token))
	}
}

// TestLegacySignOutWaitsForARecheckInFlight: a sign-out that comes while
// a page's recheck of the older shape is in flight, the last answer a
// minute old, ends the session an old replica made since; it does not go
// by that answer, which is older than the five seconds a sign-out allows.
func TestLegacySignOutWaitsForARecheckInFlight(t *testing.T) {
	env, clock, ann := learnedNoneLive(t)
	start := clock.Now()
	const old = "oldoldoldoldoldoldoldoldoldoldoldoldoldoldo"
	oldReplicaSession(t, env, ann.ID, old, clock.Now())
	clock.set(start.Add(legacyRecheck + time.Second))

	// A page's token of that shape rechecks, and its recheck waits for
	// the table until the test lets it go.
	release := lockSessions(t, env)
	page := make(chan struct{})
	go func() {
		defer close(page)
		_, _ = env.Service.Session(context.Background(), strings.Repeat("A", 43))
	}()
	waitForLockWait(t, env, "SELECT EXISTS (SELECT 1 FROM sessions WHERE legacy_token")

	waiting := make(chan struct{}, 1)
	auth.OnLegacyWait(env.Service, func() { waiting <- struct{}{} })
	signedOut := make(chan error, 1)
	go func() { signedOut <- env.Service.Logout(context.Background(), old) }()
	// Either the sign-out waits for the recheck, which the table then
	// lets answer, or it went by the older answer, recheck still in
	// flight.
	var err error
	select {
	case <-waiting:
		release()
		err = <-signedOut
	case err = <-signedOut:
		release()
	}
	if err != nil {
		t.Fatal(err)
	}
	<-page

	clock.set(start.Add(2 * time.Minute))
	if sess, err := env.Service.Session(t.Context(), old); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("a session signed out while a recheck was in flight: user %d, %v; want ErrNoSession", sess.UserID, err)
	}
}

// legacyRecheck is how often a page's token of the older shape asks
// again whether any session of that shape is live.
const legacyRecheck = time.Minute

// waitForLockWait waits until a statement of env's database that starts
// with prefix waits for a lock.
func waitForLockWait(t *testing.T, env *xcloaktest.Env, prefix string) {
	t.Helper()
	for {
		var waiting bool
		if err := env.DB.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND starts_with(ltrim(query), $1))`, prefix).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
