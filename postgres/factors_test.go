package postgres_test

import (
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestSweepMFAChallenges: the janitor's sweep removes second steps that
// expired before its time, and leaves live ones usable.
func TestSweepMFAChallenges(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	u, err := s.CreateUser(ctx, "kai@example.com", "hash", false)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"expired", "live"} {
		c := auth.MFAChallenge{TokenHash: hashOf(name), BindingHash: hashOf(name + " binding"), UserID: u.ID,
			PasswordHash: "hash", CreatedAt: at, ExpiresAt: at.Add(time.Duration(i+1) * time.Hour)}
		if err := s.AddMFAChallenge(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Sweep(ctx, auth.SweepMFAChallenges, at.Add(90*time.Minute)); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want 1 removed", n, err)
	}
	if _, err := s.MFAChallenge(ctx, hashOf("live"), hashOf("live binding"), at.Add(time.Hour)); err != nil {
		t.Fatalf("the live step after the sweep: %v", err)
	}
	if n, err := s.Sweep(ctx, auth.SweepMFAChallenges, at.Add(3*time.Hour)); err != nil || n != 1 {
		t.Fatalf("second sweep: %d %v, want 1 removed", n, err)
	}
}
