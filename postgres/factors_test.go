package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/postgres"
)

// TestSweepSkipsRowsHeld: the janitor's sweep does not wait for a
// transaction that holds one of its rows (a second step being spent, the
// sweep of another replica): it removes the others, and the held one at a
// later sweep, so that it neither stalls behind live work nor deadlocks
// with another sweep taking the rows in another order.
func TestSweepSkipsRowsHeld(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	u, err := s.CreateUser(ctx, "kai@example.com", "hash", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"held", "free 1", "free 2"} {
		c := auth.MFAChallenge{TokenHash: hashOf(name), BindingHash: hashOf(name + " binding"), UserID: u.ID,
			PasswordHash: "hash", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
		if err := s.AddMFAChallenge(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	tx := holdRows(t, s, `SELECT FROM mfa_challenges WHERE token_hash = $1 FOR UPDATE`, hashOf("held"))
	sweep, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := s.Sweep(sweep, auth.SweepMFAChallenges, at.Add(2*time.Hour)); err != nil || n != 2 {
		t.Fatalf("sweep beside a held row: %d %v, want the 2 others removed at once", n, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx, auth.SweepMFAChallenges, at.Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("sweep once the row is free: %d %v, want it removed", n, err)
	}
}

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
	if err := s.ReplaceRecoveryCodes(ctx, u.ID, [][]byte{hashOf("none")}, at, verified(u)); !errors.Is(err, auth.ErrNoFactor) {
		t.Fatalf("without a factor: %v, want ErrNoFactor", err)
	}
	id, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "app", Secret: []byte("k"), CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfirmFactor(ctx, u.ID, id, 1, [][]byte{hashOf("first")}, at, verified(u)); err != nil {
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
				if err := s.ReplaceRecoveryCodes(ctx, u.ID, sets[i], at, verified(u)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		checkOneSet(t, s, u.ID, sets, fmt.Sprintf("round %d: %d replacements at once", round, racers))
		if left, err := s.RecoveryCodesLeft(ctx, u.ID); err != nil || left != codes {
			t.Fatalf("round %d: %d codes left (%v), want %d", round, left, err, codes)
		}
	}
}

// TestFirstFactorsAtOnceKeepOneSet: an account's first factors confirmed
// at once (an app and passkeys), each with the recovery codes a first
// factor's page shows, and a replacement beside them: one writer's codes
// become the account's, and only that writer is told its codes were
// stored; the others keep them, so that no page shows codes that do not
// work. A replacement that found a factor confirmed comes after that
// writer and wins.
func TestFirstFactorsAtOnceKeepOneSet(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const passkeys, codes = 6, 10
	for round := range 5 {
		u, err := s.CreateUser(ctx, fmt.Sprintf("iris%d@example.com", round), "hash", false)
		if err != nil {
			t.Fatal(err)
		}
		app, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "app", Secret: []byte("k"), CreatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		sets := make([][][]byte, passkeys+2)
		for i := range sets {
			for j := range codes {
				sets[i] = append(sets[i], hashOf(fmt.Sprint(round, i, j)))
			}
		}
		stored := make([]bool, len(sets))
		var wg sync.WaitGroup
		wg.Go(func() {
			var err error
			if stored[0], err = s.ConfirmFactor(ctx, u.ID, app, 1, sets[0], at, verified(u)); err != nil {
				t.Error(err)
			}
		})
		for i := 1; i <= passkeys; i++ {
			wg.Go(func() {
				p := auth.Passkey{UserID: u.ID, Name: fmt.Sprint("key ", i), CredentialID: []byte(fmt.Sprint(round, "credential", i)), PublicKey: []byte("k")}
				var err error
				if _, stored[i], err = s.AddPasskey(ctx, p, sets[i], at, verified(u)); err != nil {
					t.Error(err)
				}
			})
		}
		// A replacement needs a confirmed factor: it may come first and
		// find none, which leaves the others to race alone.
		wg.Go(func() {
			err := s.ReplaceRecoveryCodes(ctx, u.ID, sets[passkeys+1], at, verified(u))
			if err != nil && !errors.Is(err, auth.ErrNoFactor) {
				t.Error(err)
			}
			stored[passkeys+1] = err == nil
		})
		wg.Wait()
		what := fmt.Sprintf("round %d: %d first factors and a replacement at once", round, passkeys+1)
		first := slices.Index(stored[:passkeys+1], true)
		if n := len(slices.DeleteFunc(slices.Clone(stored[:passkeys+1]), func(b bool) bool { return !b })); n != 1 {
			t.Fatalf("%s: %d first factors were told their codes were stored, want exactly one", what, n)
		}
		want := sets[first]
		if stored[passkeys+1] {
			want = sets[passkeys+1]
		}
		checkOneSet(t, s, u.ID, [][][]byte{want}, what)
	}
}

// checkOneSet fails unless the account's recovery codes are exactly one
// of sets, whole.
func checkOneSet(t *testing.T, s *postgres.Store, userID int64, sets [][][]byte, what string) {
	t.Helper()
	rows, err := s.Pool().Query(t.Context(), `SELECT hash FROM recovery_codes WHERE user_id = $1`, userID)
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
	if whole != 1 {
		t.Fatalf("%s: %d codes stored, %d whole sets; want the %d codes of one set", what, len(stored), whole, len(sets[0]))
	}
}

// TestConfirmBesideRemoval: an account's first factor confirmed while its
// factors are removed ends one way or the other, without an error from
// the store (two writers locking the account and the factor in opposite
// orders deadlock), and never leaves recovery codes without a factor.
func TestConfirmBesideRemoval(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for round := range 20 {
		u, err := s.CreateUser(ctx, fmt.Sprintf("jun%d@example.com", round), "hash", false)
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "app", Secret: []byte("k"), CreatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.ConfirmFactor(ctx, u.ID, id, 1, [][]byte{hashOf(fmt.Sprint(round))}, at, verified(u)); err != nil && !errors.Is(err, auth.ErrNoFactor) {
				t.Errorf("round %d: confirming: %v", round, err)
			}
		})
		wg.Go(func() {
			if _, err := s.RemoveFactors(ctx, u.ID, 0, nil); err != nil {
				t.Errorf("round %d: removing: %v", round, err)
			}
		})
		wg.Wait()
		if left, err := s.RecoveryCodesLeft(ctx, u.ID); err != nil || left != 0 {
			t.Fatalf("round %d: %d recovery codes (%v) left without a factor", round, left, err)
		}
	}
}

// confirmedTOTP gives u a confirmed authenticator-app factor, with its
// first recovery codes, and returns its id.
func confirmedTOTP(t *testing.T, s *postgres.Store, u auth.User, at time.Time) int64 {
	t.Helper()
	id, err := s.AddFactor(t.Context(), auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "app", Secret: []byte("k"), CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfirmFactor(t.Context(), u.ID, id, 1, [][]byte{hashOf("code")}, at, verified(u)); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPasswordChangeForgetsRememberedBrowser: a change of the password by
// its owner ends "remember this browser" for the browser that changed it
// too, as a reset does for every one: the next sign-in there asks for the
// second step again.
func TestPasswordChangeForgetsRememberedBrowser(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	u := addUser(t, s, "rex@example.com", false)
	now := time.Now()
	device, session := []byte("rex's device.........shaped 32b!"), []byte("rex's session........shaped 32b!")
	if err := s.AddDevice(ctx, u.ID, u.PasswordHash, u.SignOuts, device, now, 10, true); err != nil {
		t.Fatal(err)
	}
	confirmedTOTP(t, s, u, now)
	if err := s.RememberMFA(ctx, u.ID, device, now.Add(30*24*time.Hour), verified(u)); err != nil {
		t.Fatal(err)
	}
	if remembered, err := s.MFARemembered(ctx, device, now, now.Add(auth.MaxMFARememberFor)); err != nil || !remembered {
		t.Fatalf("the browser not remembered: %v, %v", remembered, err)
	}
	if err := s.CreateSession(ctx, session, auth.Session{UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, u.PasswordHash, u.SignOuts); err != nil {
		t.Fatal(err)
	}
	rotated := []byte("rex's new session....shaped 32b!")
	if err := s.ChangePassword(ctx, u.ID, u.PasswordHash, "$argon2id$v=19$m=1,t=1,p=1$c2FsdA$bmV3", session, rotated, device); err != nil {
		t.Fatal(err)
	}
	if remembered, err := s.MFARemembered(ctx, device, now, now.Add(auth.MaxMFARememberFor)); err != nil || remembered {
		t.Errorf("the browser that changed the password still remembered: %v, %v", remembered, err)
	}
}

// TestRemovingAFactorForgetsRememberedBrowsers: removing any factor, not
// only the last, and regenerating the recovery codes, forget every
// browser remembered for the second step: whoever passed it with the
// factor removed, or with a code of the set replaced (relayed, say), and
// knows the password would otherwise sign in with the password alone
// for as long as the browser is remembered.
func TestRemovingAFactorForgetsRememberedBrowsers(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  func(t *testing.T, s *postgres.Store, u auth.User, first int64)
	}{
		{"one factor of two removed", func(t *testing.T, s *postgres.Store, u auth.User, first int64) {
			v := verified(u)
			if n, err := s.RemoveFactors(t.Context(), u.ID, first, &v); err != nil || n != 1 {
				t.Fatalf("removing one factor: %d, %v", n, err)
			}
		}},
		{"recovery codes regenerated", func(t *testing.T, s *postgres.Store, u auth.User, _ int64) {
			if err := s.ReplaceRecoveryCodes(t.Context(), u.ID, [][]byte{hashOf("new code")}, time.Now(), verified(u)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s := newStore(t)
			u := addUser(t, s, "uma@example.com", false)
			now := time.Now()
			device := []byte("uma's device.........shaped 32b!")
			if err := s.AddDevice(ctx, u.ID, u.PasswordHash, u.SignOuts, device, now, 10, true); err != nil {
				t.Fatal(err)
			}
			first := confirmedTOTP(t, s, u, now)
			second, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "another app", Secret: []byte("k2"), CreatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.ConfirmFactor(ctx, u.ID, second, 1, nil, now, verified(u)); err != nil {
				t.Fatal(err)
			}
			if err := s.RememberMFA(ctx, u.ID, device, now.Add(30*24*time.Hour), verified(u)); err != nil {
				t.Fatal(err)
			}
			if ok, err := s.MFARemembered(ctx, device, now, now.Add(auth.MaxMFARememberFor)); err != nil || !ok {
				t.Fatalf("the browser not remembered: %v, %v", ok, err)
			}
			tc.act(t, s, u, first)
			if ok, err := s.MFARemembered(ctx, device, now, now.Add(auth.MaxMFARememberFor)); err != nil || ok {
				t.Errorf("the browser still remembered: %v, %v", ok, err)
			}
		})
	}
}

// TestRememberedBrowserNotLeftByLastFactorsRemoval: a browser is
// remembered for the second step after its session is made, so a removal
// of the account's last factor can commit in between. It forgets every
// remembered browser, and the browser remembered after it must not stay
// remembered either: it would skip a factor its owner enrolls later.
func TestRememberedBrowserNotLeftByLastFactorsRemoval(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	u := addUser(t, s, "sam@example.com", false)
	now := time.Now()
	device := []byte("sam's device.........shaped 32b!")
	if err := s.AddDevice(ctx, u.ID, u.PasswordHash, u.SignOuts, device, now, 10, true); err != nil {
		t.Fatal(err)
	}
	confirmedTOTP(t, s, u, now)
	// The removal, held open after it forgot the remembered browsers, as
	// RemoveFactors' transaction is when the browser is remembered.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	for _, q := range []string{
		`SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE`,
		`DELETE FROM second_factors WHERE user_id = $1`,
		`UPDATE devices SET mfa_remembered_until = NULL WHERE user_id = $1 AND mfa_remembered_until IS NOT NULL`,
	} {
		if _, err := tx.Exec(ctx, q, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	remembered := make(chan error, 1)
	go func() { remembered <- s.RememberMFA(ctx, u.ID, device, now.Add(30*24*time.Hour), verified(u)) }()
	waitForLockWaits(t, s.Pool(), 1) // RememberMFA waits beside the removal
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-remembered; err != nil {
		t.Fatal(err)
	}
	if ok, err := s.MFARemembered(ctx, device, now, now.Add(auth.MaxMFARememberFor)); err != nil || ok {
		t.Errorf("the browser remembered for the second step after the account's last factor was removed: %v, %v", ok, err)
	}
}

// TestSecondStepBesideDisabling: a second step stored as the account is
// disabled takes the account's row before the expired steps it forgets,
// as the disabling (and a new password, a sign-out everywhere, a removal
// of the last factor) takes it before it deletes the account's steps: in
// the other order, each waited for the other.
func TestSecondStepBesideDisabling(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	u := addUser(t, s, "dee@example.com", false)
	now := time.Now()
	step := func(token string, at time.Time) auth.MFAChallenge {
		return auth.MFAChallenge{TokenHash: hashOf(token), BindingHash: hashOf("b"), UserID: u.ID, PasswordHash: u.PasswordHash,
			CreatedAt: at, ExpiresAt: at.Add(5 * time.Minute), SignOuts: u.SignOuts}
	}
	// An expired step, which the next one stored forgets.
	if err := s.AddMFAChallenge(ctx, step("old", now.Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	// The disabling, holding the account's row as DisableUser does.
	tx := holdRows(t, s, `UPDATE users SET disabled_at = now() WHERE id = $1`, u.ID)
	stored := make(chan error, 1)
	go func() { stored <- s.AddMFAChallenge(ctx, step("new", now)) }()
	waitForLockWaits(t, s.Pool(), 1) // the step waits beside the disabling
	if _, err := tx.Exec(ctx, `DELETE FROM mfa_challenges WHERE user_id = $1`, u.ID); err != nil {
		t.Fatalf("the disabling's deletion of the account's steps: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stored; !errors.Is(err, auth.ErrPasswordChanged) {
		t.Errorf("a second step stored beside the disabling: %v, want ErrPasswordChanged", err)
	}
}

// TestRememberMFAOnlyForTheVerifiedPassword: a browser is remembered for
// the second step only while the account's password and sign-outs are
// those its sign-in verified. A new password or a sign-out everywhere
// committed between the session and the remembering leaves it asked for
// a code again.
func TestRememberMFAOnlyForTheVerifiedPassword(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	now := time.Now()
	for i, change := range []string{
		`UPDATE users SET sign_outs = sign_outs + 1 WHERE id = $1`,
		`UPDATE users SET password_hash = 'another' WHERE id = $1`,
	} {
		u := addUser(t, s, fmt.Sprintf("ivy%d@example.com", i), false)
		device := hashOf(change)
		if err := s.AddDevice(ctx, u.ID, u.PasswordHash, u.SignOuts, device, now, 10, true); err != nil {
			t.Fatal(err)
		}
		confirmedTOTP(t, s, u, now)
		if _, err := s.Pool().Exec(ctx, change, u.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.RememberMFA(ctx, u.ID, device, now.Add(30*24*time.Hour), verified(u)); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.MFARemembered(ctx, device, now, now.Add(auth.MaxMFARememberFor)); err != nil || ok {
			t.Errorf("remembered after %q: %v, %v", change, ok, err)
		}
	}
}

// TestSecondStepSpentOnceAtOnce: each thing a second step spends (a
// recovery code, a TOTP step, the step itself, a passkey's ceremony, a
// held answer's mark) is spent by exactly one of twenty requests that
// race for it: each is one conditional statement, whose losers find it
// spent.
func TestSecondStepSpentOnceAtOnce(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	u, err := s.CreateUser(ctx, "kai@example.com", "hash", false)
	if err != nil {
		t.Fatal(err)
	}
	factor, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "Phone", Secret: []byte("k"), CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfirmFactor(ctx, u.ID, factor, 100, [][]byte{hashOf("code")}, now, verified(u)); err != nil {
		t.Fatal(err)
	}
	step := func(name string) auth.MFAChallenge {
		return auth.MFAChallenge{TokenHash: hashOf(name), BindingHash: hashOf(name + " binding"), UserID: u.ID,
			PasswordHash: u.PasswordHash, CreatedAt: now, ExpiresAt: now.Add(time.Hour), SignOuts: u.SignOuts}
	}
	if err := s.AddMFAChallenge(ctx, step("step")); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCeremony(ctx, auth.Ceremony{BindingHash: hashOf("ceremony"), Purpose: "passkey", Session: []byte("{}"),
		ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		spend func() (bool, error)
	}{
		{"a recovery code", func() (bool, error) {
			return s.UseRecoveryCode(context.Background(), u.ID, hashOf("code"), now)
		}},
		{"a TOTP step", func() (bool, error) {
			return s.UseTOTPStep(context.Background(), factor, 101, now)
		}},
		{"a second step", func() (bool, error) {
			_, err := s.ConsumeMFAChallenge(context.Background(), hashOf("step"), hashOf("step binding"), now)
			return err == nil, ignore(err, auth.ErrInvalidToken)
		}},
		{"a passkey ceremony", func() (bool, error) {
			_, err := s.TakeCeremony(context.Background(), hashOf("ceremony"), "passkey", now)
			return err == nil, ignore(err, auth.ErrInvalidToken)
		}},
		{"a held answer's mark", func() (bool, error) {
			return s.SpendHeldMFA(context.Background(), step("held"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			spent := 0
			for range 20 {
				wg.Go(func() {
					ok, err := c.spend()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Error(err)
					}
					if ok {
						spent++
					}
				})
			}
			wg.Wait()
			if spent != 1 {
				t.Errorf("spent %d times by 20 requests at once, want once", spent)
			}
		})
	}
}

// ignore is err, or nil if it is want.
func ignore(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	return err
}

// TestKeysSetUpAtOnceLeaveOne: of authenticator apps set up at once
// (a double click, two tabs), one unconfirmed key is left, as one set up
// after another leaves the last: each replaces the one before it.
func TestKeysSetUpAtOnceLeaveOne(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	u, err := s.CreateUser(ctx, "kai@example.com", "hash", false)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := s.AddFactor(context.Background(), auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "Phone",
				Secret: []byte("k"), CreatedAt: time.Now()}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	factors, err := s.Factors(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(factors) != 1 {
		t.Errorf("%d unconfirmed keys after 20 set up at once, want 1", len(factors))
	}
}

// TestNewestTOTPFactor: the store finds the newest confirmed authenticator
// app whose secret begins with the byte asked for, with its account (the
// seal's associated data), and none among factors being set up, passkeys,
// or secrets of the other format.
func TestNewestTOTPFactor(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := s.NewestTOTPFactor(ctx, 1); !errors.Is(err, auth.ErrNoFactor) {
		t.Fatalf("in a database without factors: %v, want ErrNoFactor", err)
	}
	add := func(email string, secret []byte, confirm bool) (auth.User, int64) {
		t.Helper()
		u, err := s.CreateUser(ctx, email, "hash", false)
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "app", Secret: secret, CreatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		if confirm {
			if _, err := s.ConfirmFactor(ctx, u.ID, id, 1, nil, at, verified(u)); err != nil {
				t.Fatal(err)
			}
		}
		return u, id
	}
	ann, annID := add("ann@example.com", []byte{1, 'a'}, true)
	add("bob@example.com", []byte{0, 'b'}, true)
	add("cy@example.com", []byte{1, 'c'}, false)
	add("di@example.com", []byte{}, true)

	f, err := s.NewestTOTPFactor(ctx, 1)
	if err != nil || f.ID != annID || f.UserID != ann.ID || f.Kind != auth.FactorTOTP || !bytes.Equal(f.Secret, []byte{1, 'a'}) {
		t.Fatalf("newest sealed factor: %+v, %v; want ann's (%d)", f, err, annID)
	}
	eve, eveID := add("eve@example.com", []byte{1, 'e'}, true)
	if f, err := s.NewestTOTPFactor(ctx, 1); err != nil || f.ID != eveID || f.UserID != eve.ID {
		t.Errorf("newest sealed factor after another: %+v, %v; want eve's (%d)", f, err, eveID)
	}
	if f, err := s.NewestTOTPFactor(ctx, 0); err != nil || !bytes.Equal(f.Secret, []byte{0, 'b'}) {
		t.Errorf("newest plain factor: %+v, %v; want bob's", f, err)
	}
}
