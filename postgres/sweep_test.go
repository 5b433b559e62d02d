package postgres_test

import (
	"slices"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/postgres"
)

// TestSweepLockouts: the records of lockouts that ended (by their time,
// an unlock or a reset) before the sweep's time are removed, as the
// security events that tell of them are; a lockout in force is kept
// whatever its age, and so is one whose time ran out but that no sweep
// of lockout ends has closed yet, which that sweep still needs.
func TestSweepLockouts(t *testing.T) {
	ctx := t.Context()
	_, pool := testenv.Schema(t)
	s := postgres.New(pool)
	cutoff := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	old := cutoff.Add(-48 * time.Hour)
	for _, l := range []auth.Lockout{
		{Account: "ended@example.com", Level: 1, LockedAt: old, LockedUntil: old.Add(time.Hour)},
		{Account: "unlocked@example.com", Level: 1, LockedAt: old, LockedUntil: old.Add(time.Hour)},
		{Account: "unclosed@example.com", Level: 1, LockedAt: old, LockedUntil: old.Add(time.Hour)},
		{Account: "long@example.com", Level: 9, LockedAt: old, LockedUntil: cutoff.Add(time.Hour)},
		{Account: "recent@example.com", Level: 1, LockedAt: cutoff.Add(-30 * time.Minute), LockedUntil: cutoff.Add(time.Minute)},
	} {
		if err := s.RecordLockout(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	// The sweep of lockout ends, as it ran long ago, closes the first;
	// an unlock ends the second early.
	if err := s.ClearLockout(ctx, "unlocked@example.com", old.Add(time.Minute), "admin:root@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE lockouts SET cleared_at = locked_until, cleared_by = $2 WHERE account_key = $1`,
		"ended@example.com", auth.LockoutExpired); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE lockouts SET cleared_at = locked_until, cleared_by = $2 WHERE account_key = $1`,
		"recent@example.com", auth.LockoutExpired); err != nil {
		t.Fatal(err)
	}

	n, err := s.Sweep(ctx, auth.SweepLockouts, cutoff)
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d %v, want the 2 lockouts ended before the cutoff removed", n, err)
	}
	rows, err := pool.Query(ctx, `SELECT account_key FROM lockouts ORDER BY account_key`)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"long@example.com", "recent@example.com", "unclosed@example.com"}; !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
}
