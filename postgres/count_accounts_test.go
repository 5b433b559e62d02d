package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestCountFactorAccountsFailsAsUnavailable: a count Postgres does not
// answer is the database being unavailable, as the dashboard's other
// figures' failures are (CountActiveLockouts), so that the dashboard
// answers 503, not 500.
func TestCountFactorAccountsFailsAsUnavailable(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.CountFactorAccounts(ctx); err == nil || !errors.Is(err, auth.ErrUnavailable) {
		t.Errorf("a count that did not finish: %v; want auth.ErrUnavailable", err)
	}
}

// TestCountActiveLockoutsCountsAccounts: an account locked at its
// password and at its second step (its own, a held answer's, its
// passkeys' alone) counts once among the accounts locked.
func TestCountActiveLockoutsCountsAccounts(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	for _, key := range []string{
		"ann@example.com", auth.SecondStepLockPrefix + "ann@example.com", auth.SecondStepLockPrefix + "held ann@example.com",
		auth.SecondStepLockPrefix + "passkey bob@example.com", "app shop mfa held ann@example.com",
	} {
		if err := s.RecordLockout(t.Context(), auth.Lockout{Account: key, Level: 1, Failures: 5, LockedAt: now, LockedUntil: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.CountActiveLockouts(t.Context(), now); err != nil || n != 3 {
		t.Errorf("CountActiveLockouts = %d, %v; want 3 (ann, bob and the application's account)", n, err)
	}
}
