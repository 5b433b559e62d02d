package auth_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// lockSessions holds the sessions table until the test ends, or until it
// calls the function returned, so that any query of it waits: what is
// answered meanwhile cost no query.
func lockSessions(t *testing.T, env *xcloaktest.Env) (release func()) {
	t.Helper()
	tx, err := env.DB.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	release = func() { _ = tx.Rollback(context.Background()) }
	t.Cleanup(release)
	if _, err := tx.Exec(t.Context(), `LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return release
}

// madeUpTokens are session cookies of every shape the service reads that
// it did not make: random ones of its shape, a real one with its tag
// changed, and one of the shape of the tokens made before they were tagged.
func madeUpTokens(real string) map[string]string {
	var b [48]byte
	rand.Read(b[:])
	retagged := []byte(real)
	if retagged[len(retagged)-1] == 'A' {
		retagged[len(retagged)-1] = 'B'
	} else {
		retagged[len(retagged)-1] = 'A'
	}
	return map[string]string{
		"random":             base64.RawURLEncoding.EncodeToString(b[:]),
		"real, retagged":     string(retagged),
		"of the older shape": strings.Repeat("A", 43),
	}
}

// TestMadeUpSessionCostsNoQuery: a session cookie the service did not make
// is refused on its pages, by forward-auth and at sign-out without a
// query, so that a flood of them costs Postgres nothing; a real one still
// reads the store.
func TestMadeUpSessionCostsNoQuery(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	env.AddUser(t, "ann@example.com", "correct horse battery staple", false)
	real := signInAt(t, env, "ann@example.com").Token
	made := madeUpTokens(real)
	// The first token of the older shape asks whether any session of
	// that shape is still live; none is.
	if _, err := env.Service.Session(t.Context(), made["of the older shape"]); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("a token of the older shape: %v", err)
	}

	lockSessions(t, env)
	for name, token := range made {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if _, err := env.Service.Session(ctx, token); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("%s token on a page: %v; want ErrNoSession without a query", name, err)
		}
		if _, err := env.Service.ProxySession(ctx, token); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("%s token at forward-auth: %v; want ErrNoSession without a query", name, err)
		}
		if err := env.Service.Logout(ctx, token); err != nil {
			t.Errorf("%s token signed out: %v; want nothing to do", name, err)
		}
		cancel()
	}
	// The real one waits for the table: the lock is what told the others
	// apart.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := env.Service.Session(ctx, real); err == nil || errors.Is(err, auth.ErrNoSession) {
		t.Errorf("the real session while its table is locked: %v; want it to wait and fail", err)
	}
}

// TestSessionsOfTheOlderShapeLastTheirTime: the sessions made before
// tokens were tagged, whose cookies are of the older shape, go on signing
// their browsers in until they end; once none is live, their shape costs
// no query.
func TestSessionsOfTheOlderShapeLastTheirTime(t *testing.T) {
	clock := &idleClock{now: time.Now().Truncate(time.Second)}
	env := xcloaktest.New(t, xcloaktest.Options{Now: clock.Now})
	ann := env.AddUser(t, "ann@example.com", "correct horse battery staple", false)
	const old = "oldoldoldoldoldoldoldoldoldoldoldoldoldoldo" // 43 characters
	hash := auth.HashToken(old)
	if _, err := env.DB.Exec(t.Context(), `
		INSERT INTO sessions (id_hash, user_id, created_at, expires_at, last_seen_at, public_id, ends_at, legacy_token)
		VALUES ($1, $2, $3, $4, $3, 'ffffffffffffffffffffffffffffffff', $4, true)`,
		hash, ann.ID, clock.Now(), clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sess, err := env.Service.Session(t.Context(), old)
	if err != nil || sess.UserID != ann.ID {
		t.Fatalf("a session of the older shape: %+v, %v; want ann's", sess, err)
	}
	if _, err := env.Service.ProxySession(t.Context(), old); err != nil {
		t.Fatalf("a session of the older shape at forward-auth: %v", err)
	}
	if err := env.Service.Logout(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Service.Session(t.Context(), old); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("a signed-out session of the older shape: %v", err)
	}

	// None is live now; a minute on, the next token of that shape asks
	// again and learns it, and from then on none costs a query.
	clock.set(clock.Now().Add(time.Minute + time.Second))
	if _, err := env.Service.Session(t.Context(), old); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("a token of the older shape: %v", err)
	}
	lockSessions(t, env)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := env.Service.Session(ctx, old); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("a token of the older shape once none is live: %v; want ErrNoSession without a query", err)
	}
}

// TestEndedSessionCostsOneQuery: a token whose session has ended, signed
// out here or ended elsewhere, costs at most one query a minute on a
// replica, however often it comes back: an ended session never returns,
// so whoever keeps a copy of its cookie cannot load Postgres with it.
func TestEndedSessionCostsOneQuery(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	env.AddUser(t, "ann@example.com", "correct horse battery staple", false)
	signedOut := signInAt(t, env, "ann@example.com").Token
	endedElsewhere := signInAt(t, env, "ann@example.com").Token
	if err := env.Service.Logout(t.Context(), signedOut); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(t.Context(), `DELETE FROM sessions WHERE id_hash = $1`, auth.HashToken(endedElsewhere)); err != nil {
		t.Fatal(err)
	}
	// The one query that learns it.
	if _, err := env.Service.ProxySession(t.Context(), endedElsewhere); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("a session ended elsewhere: %v", err)
	}

	lockSessions(t, env)
	for name, token := range map[string]string{"signed out": signedOut, "ended elsewhere": endedElsewhere} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if _, err := env.Service.Session(ctx, token); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("%s, on a page: %v; want ErrNoSession without a query", name, err)
		}
		if _, err := env.Service.ProxySession(ctx, token); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("%s, at forward-auth: %v; want ErrNoSession without a query", name, err)
		}
		if err := env.Service.Logout(ctx, token); err != nil {
			t.Errorf("%s, signed out again: %v; want nothing to do", name, err)
		}
		cancel()
	}
}
