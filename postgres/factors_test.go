package postgres_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// TestReplaceRecoveryCodesAtOnce: replacements of an account's recovery
// codes at once leave exactly one set, whole; an account without a
// confirmed factor gets none.
func TestReplaceRecoveryCodesAtOnce(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	u, err := s.CreateUser(ctx, "rhea@example.com", "hash", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReplaceRecoveryCodes(ctx, u.ID, [][]byte{hashOf("none")}, at); !errors.Is(err, auth.ErrNoFactor) {
		t.Fatalf("without a factor: %v, want ErrNoFactor", err)
	}
	id, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "app", Secret: []byte("k"), CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ConfirmFactor(ctx, u.ID, id, 1, [][]byte{hashOf("first")}, at); err != nil {
		t.Fatal(err)
	}
	const racers, codes = 8, 10
	for round := range 5 {
		sets := make([][][]byte, racers)
		var wg sync.WaitGroup
		for i := range racers {
			for j := range codes {
				sets[i] = append(sets[i], hashOf(fmt.Sprint(round, i, j)))
			}
			wg.Go(func() {
				if err := s.ReplaceRecoveryCodes(ctx, u.ID, sets[i], at); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		rows, err := s.Pool().Query(ctx, `SELECT hash FROM recovery_codes WHERE user_id = $1`, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			t.Fatal(err)
		}
		whole := 0
		for _, set := range sets {
			if len(stored) == len(set) && !slices.ContainsFunc(stored, func(h []byte) bool {
				return !slices.ContainsFunc(set, func(g []byte) bool { return bytes.Equal(g, h) })
			}) {
				whole++
			}
		}
		if len(stored) != codes || whole != 1 {
			t.Fatalf("round %d: %d codes stored after %d replacements at once, %d whole sets; want %d codes of one set", round, len(stored), racers, whole, codes)
		}
		if left, err := s.RecoveryCodesLeft(ctx, u.ID); err != nil || left != codes {
			t.Fatalf("round %d: %d codes left (%v), want %d", round, left, err, codes)
		}
	}
}
