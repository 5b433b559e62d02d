package auth_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestEndingNothingKeepsTheSessionCache: the proxy session cache, which
// every forward-auth answer leans on, is emptied when a session ends, not
// when a signed-in user asks to end one that is not there or to end the
// others when there are none: those would let one account keep every
// replica's cache empty and its answers on Postgres.
func TestEndingNothingKeepsTheSessionCache(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := f.svc.Session(t.Context(), res.Session.Token)
	if err != nil {
		t.Fatal(err)
	}
	before := auth.SessionCachePurges(f.svc)
	if _, err := f.svc.EndSession(t.Context(), sess, res.Session.Token, strings.Repeat("0", 32), client("192.0.2.7")); !errors.Is(err, auth.ErrNotListed) {
		t.Fatalf("ending an unknown session: %v, want ErrNotListed", err)
	}
	if n, err := f.svc.EndOtherSessions(t.Context(), sess, res.Session.Token, client("192.0.2.7")); err != nil || n != 0 {
		t.Fatalf("ending the others of a lone session: %d, %v", n, err)
	}
	if got := auth.SessionCachePurges(f.svc); got != before {
		t.Fatalf("the session cache was emptied %d times by endings that ended nothing", got-before)
	}
}
