package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/xcloak/xcloak/auth"
)

// TestLinksSpentAfterTheAccount: spending an unlock or a reset link takes
// the account's row before the link's, as every transaction that touches
// both does (a password change, a reset, a disabling). In the other order
// two of them could each hold what the other waits for: Postgres then
// aborts one (SQLSTATE 40P01), which its user sees as 503. Each case holds
// the account's row while the two queue for it in the order that
// deadlocked, then lets go: the first finishes, and the second finds its
// link spent.
func TestLinksSpentAfterTheAccount(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	now := time.Now()
	for _, c := range []struct {
		name   string
		first  func(u auth.User) error
		second func(u auth.User) error
	}{
		{"a new password, then an unlock link", func(u auth.User) error {
			_, err := s.SetPassword(ctx, u.Email, "$argon2id$v=19$m=1,t=1,p=1$c2FsdA$bmV3")
			return err
		}, func(u auth.User) error {
			_, _, err := s.UseUnlockToken(ctx, hashOf("unlock "+u.Email), now, hashOf("device "+u.Email), 10)
			return err
		}},
		{"two reset links at once", func(u auth.User) error {
			_, _, err := s.ResetPassword(ctx, hashOf("reset one "+u.Email), now, "$argon2id$v=19$m=1,t=1,p=1$c2FsdA$b25l")
			return err
		}, func(u auth.User) error {
			_, _, err := s.ResetPassword(ctx, hashOf("reset two "+u.Email), now, "$argon2id$v=19$m=1,t=1,p=1$c2FsdA$dHdv")
			return err
		}},
		{"a disabling, then a reset link", func(u auth.User) error {
			_, err := s.DisableUser(ctx, u.ID, now)
			return err
		}, func(u auth.User) error {
			_, _, err := s.ResetPassword(ctx, hashOf("reset one "+u.Email), now, "$argon2id$v=19$m=1,t=1,p=1$c2FsdA$b25l")
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := addUser(t, s, c.name+"@example.com", false)
			addUser(t, s, "admin "+c.name+"@example.com", true) // DisableUser keeps one administrator
			for _, tok := range []string{"reset one ", "reset two "} {
				if err := s.AddResetToken(ctx, hashOf(tok+u.Email), u.ID, now.Add(-time.Minute), now.Add(time.Hour), false); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.AddUnlockToken(ctx, hashOf("unlock "+u.Email), u.ID, now.Add(-time.Minute), now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			hold := holdRows(t, s, `SELECT FROM users WHERE id = $1 FOR UPDATE`, u.ID)
			first, second := make(chan error, 1), make(chan error, 1)
			go func() { first <- c.first(u) }()
			waitForLockWaits(t, s.Pool(), 1)
			go func() { second <- c.second(u) }()
			waitForLockWaits(t, s.Pool(), 2)
			if err := hold.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			for i, ch := range []chan error{first, second} {
				var pgErr *pgconn.PgError
				switch err := <-ch; {
				case errors.As(err, &pgErr):
					t.Errorf("transaction %d: %v (SQLSTATE %s)", i+1, err, pgErr.Code)
				case i == 0 && err != nil:
					t.Errorf("the first transaction: %v", err)
				case i == 1 && !errors.Is(err, auth.ErrInvalidToken):
					t.Errorf("the second transaction: %v, want its link spent (ErrInvalidToken)", err)
				}
			}
		})
	}
}

// waitForLockWaits waits until n sessions of the test's database wait for
// a lock, up to 30 s: a bound on a transaction that never comes to the
// lock, which on a loaded machine may take seconds to.
func waitForLockWaits(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock after 30 s, want %d", waiting, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNewDevicesForgottenAfterTheAccounts: attack mode's forgetting of
// the browsers new since it began takes the accounts' rows before their
// devices and sessions, as a reset, a password change, a disabling and a
// sign-out everywhere do (each ends the sessions, then forgets the
// devices). In the other order the forgetting could hold a new device
// while waiting for a session the reset ended, and the reset wait for
// that device: Postgres then aborts one (SQLSTATE 40P01), a reset that
// fails or browsers an attack signed in that stay. The reset is stopped
// past the sessions by a hold on another of the account's reset links,
// the forgetting started behind it, then the hold let go.
func TestNewDevicesForgottenAfterTheAccounts(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	now := time.Now().Truncate(time.Second)
	since := now.Add(-time.Minute)
	// held locks a row of u's that the case's transaction writes after
	// ending the sessions and before forgetting the devices.
	const heldLink = `SELECT FROM password_reset_tokens WHERE token_hash = $1 FOR UPDATE`
	const heldStep = `SELECT FROM mfa_challenges WHERE token_hash = $1 FOR UPDATE`
	for _, c := range []struct {
		name  string
		held  string
		first func(u auth.User) error
	}{
		{"a reset", heldLink, func(u auth.User) error {
			_, _, err := s.ResetPassword(ctx, hashOf("reset "+u.Email), now, "$argon2id$v=19$m=1,t=1,p=1$c2FsdA$bmV3")
			return err
		}},
		{"a disabling", heldLink, func(u auth.User) error {
			_, err := s.DisableUser(ctx, u.ID, now)
			return err
		}},
		{"a password change", heldStep, func(u auth.User) error {
			return s.ChangePassword(ctx, u.ID, u.PasswordHash, "$argon2id$v=19$m=1,t=1,p=1$c2FsdA$bmV3",
				hashOf("session "+u.Email), hashOf("new session "+u.Email), nil)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := addUser(t, s, c.name+"@example.com", false)
			addUser(t, s, "admin "+c.name+"@example.com", true) // DisableUser keeps one administrator
			for _, name := range []string{"session ", "other session "} {
				sess := auth.Session{UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
				if err := s.CreateSession(ctx, hashOf(name+u.Email), sess, u.PasswordHash, u.SignOuts); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.AddDevice(ctx, u.ID, "", 0, hashOf("device "+u.Email), now, 10, false); err != nil {
				t.Fatal(err)
			}
			for _, tok := range []string{"reset ", "held "} {
				if err := s.AddResetToken(ctx, hashOf(tok+u.Email), u.ID, now.Add(-time.Minute), now.Add(time.Hour), false); err != nil {
					t.Fatal(err)
				}
			}
			step := auth.MFAChallenge{TokenHash: hashOf("held " + u.Email), BindingHash: hashOf("binding " + u.Email), UserID: u.ID,
				PasswordHash: u.PasswordHash, CreatedAt: now, ExpiresAt: now.Add(time.Hour), SignOuts: u.SignOuts}
			if err := s.AddMFAChallenge(ctx, step); err != nil {
				t.Fatal(err)
			}
			hold := holdRows(t, s, c.held, hashOf("held "+u.Email))
			first, second := make(chan error, 1), make(chan error, 1)
			go func() { first <- c.first(u) }()
			waitForLockWaits(t, s.Pool(), 1)
			go func() {
				_, err := s.ForgetNewDevices(ctx, since, nil)
				second <- err
			}()
			waitForLockWaits(t, s.Pool(), 2)
			if err := hold.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			for i, ch := range []chan error{first, second} {
				var pgErr *pgconn.PgError
				switch err := <-ch; {
				case errors.As(err, &pgErr):
					t.Errorf("transaction %d: %v (SQLSTATE %s)", i+1, err, pgErr.Code)
				case err != nil:
					t.Errorf("transaction %d: %v", i+1, err)
				}
			}
		})
	}
}

// TestFactorAddedAfterTheAccount: a new authenticator app being set up
// takes the account's row before the key it replaces, as every writer of
// an account's factors does. In the other order, a deletion of the
// account that came between them would wait for the old key while the
// new one waited for the account: Postgres then aborts one (SQLSTATE
// 40P01). The old key is held while the two queue for it, then let go.
func TestFactorAddedAfterTheAccount(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	now := time.Now().Truncate(time.Second)
	u := addUser(t, s, "ann@example.com", false)
	addUser(t, s, "root@example.com", true) // DeleteUser keeps one administrator
	add := func() error {
		_, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "Phone", Secret: []byte("k"), CreatedAt: now})
		return err
	}
	if err := add(); err != nil {
		t.Fatal(err)
	}
	hold := holdRows(t, s, `SELECT FROM second_factors WHERE user_id = $1 FOR UPDATE`, u.ID)
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- add() }()
	waitForLockWaits(t, s.Pool(), 1)
	go func() {
		_, err := s.DeleteUser(ctx, u.ID)
		second <- err
	}()
	waitForLockWaits(t, s.Pool(), 2)
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []chan error{first, second} {
		var pgErr *pgconn.PgError
		if err := <-ch; errors.As(err, &pgErr) {
			t.Errorf("transaction %d: %v (SQLSTATE %s)", i+1, err, pgErr.Code)
		}
	}
	if _, err := s.UserByID(ctx, u.ID); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("the account after its deletion: %v, want ErrNoUser", err)
	}
}
