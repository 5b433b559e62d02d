package auth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestSignOutEndsASessionEndedOnlyByThisReplicasTTL: a replica whose
// SessionTTL is shorter (a rolling change of it) finds an older session
// ended in memory, not in the store. Signing out there must still delete
// it, or a copy of the cookie stays signed in at the replicas of the
// longer TTL.
func TestSignOutEndsASessionEndedOnlyByThisReplicasTTL(t *testing.T) {
	clock := &idleClock{now: time.Now().Truncate(time.Second)}
	long := xcloaktest.New(t, xcloaktest.Options{Now: clock.Now, Auth: func(c *auth.Config) { c.SessionIdle, c.SessionTTL = 0, 24*time.Hour }})
	short := long.Replica(t, xcloaktest.Options{Now: clock.Now, Auth: func(c *auth.Config) { c.SessionIdle, c.SessionTTL = 0, 12*time.Hour }})
	long.AddUser(t, "ann@example.com", "correct horse battery staple", false)
	sess := signInAt(t, long, "ann@example.com")

	clock.set(clock.Now().Add(13 * time.Hour))
	if _, err := short.Service.Session(t.Context(), sess.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Fatalf("past the shorter TTL: %v; want ErrNoSession", err)
	}
	if err := short.Service.Logout(t.Context(), sess.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := long.Service.Session(t.Context(), sess.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("signed out on the replica of the shorter TTL, the session is live on the other: %v", err)
	}
}
