package postgres_test

import (
	"context"
	"errors"
	"testing"

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
