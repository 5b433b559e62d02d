package postgres_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/postgres"
)

func emailsOf(users []auth.User) []string {
	out := make([]string, len(users))
	for i, u := range users {
		out[i] = u.Email
	}
	return out
}

func addUser(t testing.TB, s *postgres.Store, email string, admin bool) auth.User {
	t.Helper()
	u, err := s.CreateUser(t.Context(), email, "$argon2id$v=19$m=1,t=1,p=1$c2FsdA$aGFzaA", admin)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSearchUsers: a prefix finds exactly the emails that start with it,
// in byte order, pages by cursor follow one another without gaps or
// repeats, and characters that are patterns to LIKE are plain here.
func TestSearchUsers(t *testing.T) {
	s := newStore(t)
	for _, e := range []string{"ann@example.com", "anna@example.com", "an_x@example.com", "an%y@example.com",
		"bob@example.com", "zoë@example.com", "zz@example.com", "é@example.com"} {
		addUser(t, s, e, false)
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"an%y@example.com", "an_x@example.com", "ann@example.com", "anna@example.com", "bob@example.com",
			"zoë@example.com", "zz@example.com", "é@example.com"}},
		{"an", []string{"an%y@example.com", "an_x@example.com", "ann@example.com", "anna@example.com"}},
		{"an_", []string{"an_x@example.com"}},
		{"an%", []string{"an%y@example.com"}},
		{"ann@", []string{"ann@example.com"}},
		{"zo", []string{"zoë@example.com"}},
		{"é", []string{"é@example.com"}},
		{"nobody", []string{}},
	} {
		got, err := s.SearchUsers(t.Context(), c.prefix, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if g := emailsOf(got); !slices.Equal(g, c.want) {
			t.Errorf("prefix %q: got %q, want %q", c.prefix, g, c.want)
		}
	}
	// Pages of two, by the last email of each.
	var all []string
	after := ""
	for range 10 {
		page, err := s.SearchUsers(t.Context(), "", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, emailsOf(page)...)
		after = page[len(page)-1].Email
	}
	if len(all) != 8 || !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != 8 {
		t.Errorf("pages of two: %q", all)
	}
}

// TestLastAdminUnderConcurrency: two administrators demoting (or
// disabling, or deleting) each other at the same moment leave one of
// them: exactly one change wins, the other is ErrLastAdmin. Run many
// times so that the two transactions really overlap.
func TestLastAdminUnderConcurrency(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	actions := map[string]func(id int64) (auth.User, error){
		"demote":  func(id int64) (auth.User, error) { return s.SetUserAdmin(ctx, id, false) },
		"disable": func(id int64) (auth.User, error) { return s.DisableUser(ctx, id, time.Now()) },
		"delete":  func(id int64) (auth.User, error) { return s.DeleteUser(ctx, id) },
	}
	for name, act := range actions {
		for i := range 30 {
			a := addUser(t, s, fmt.Sprintf("a-%s-%d@example.com", name, i), true)
			b := addUser(t, s, fmt.Sprintf("b-%s-%d@example.com", name, i), true)
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, 2)
			for j, id := range []int64{a.ID, b.ID} {
				wg.Go(func() {
					<-start
					_, errs[j] = act(id)
				})
			}
			close(start)
			wg.Wait()
			lost := 0
			for _, err := range errs {
				switch {
				case errors.Is(err, auth.ErrLastAdmin):
					lost++
				case err != nil:
					t.Fatalf("%s: %v", name, err)
				}
			}
			if lost != 1 {
				t.Fatalf("%s round %d: %d of 2 refused, want exactly 1 (errors %v)", name, i, lost, errs)
			}
			var admins int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM users WHERE is_admin AND disabled_at IS NULL`).Scan(&admins); err != nil {
				t.Fatal(err)
			}
			if admins != 1 {
				t.Fatalf("%s round %d: %d enabled administrators left, want 1", name, i, admins)
			}
			// Back to none, for the next round's pair.
			if _, err := s.Pool().Exec(ctx, `DELETE FROM users`); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLastAdminRules: the last enabled administrator can be neither
// demoted, disabled nor deleted; a disabled administrator does not count
// as another one, and can itself be demoted; members are never refused.
func TestLastAdminRules(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	root := addUser(t, s, "root@example.com", true)
	member := addUser(t, s, "member@example.com", false)
	if _, err := s.SetUserAdmin(ctx, root.ID, false); !errors.Is(err, auth.ErrLastAdmin) {
		t.Errorf("demoting the only admin: %v, want ErrLastAdmin", err)
	}
	if _, err := s.DisableUser(ctx, root.ID, time.Now()); !errors.Is(err, auth.ErrLastAdmin) {
		t.Errorf("disabling the only admin: %v, want ErrLastAdmin", err)
	}
	if _, err := s.DeleteUser(ctx, root.ID); !errors.Is(err, auth.ErrLastAdmin) {
		t.Errorf("deleting the only admin: %v, want ErrLastAdmin", err)
	}
	other := addUser(t, s, "other@example.com", true)
	if _, err := s.DisableUser(ctx, other.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetUserAdmin(ctx, root.ID, false); !errors.Is(err, auth.ErrLastAdmin) {
		t.Errorf("demoting the only enabled admin beside a disabled one: %v, want ErrLastAdmin", err)
	}
	if u, err := s.SetUserAdmin(ctx, other.ID, false); err != nil || u.IsAdmin {
		t.Errorf("demoting a disabled admin: %+v %v", u, err)
	}
	if _, err := s.DisableUser(ctx, member.ID, time.Now()); err != nil {
		t.Errorf("disabling a member: %v", err)
	}
	if _, err := s.SetUserAdmin(ctx, 99999, true); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("promoting no one: %v, want ErrNoUser", err)
	}
	if _, err := s.DeleteUser(ctx, 99999); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("deleting no one: %v, want ErrNoUser", err)
	}
}

// TestDisabledAccountRefusedByItsReads: a disabled account's session and
// links, were any left in place (DisableUser ends and spends them), are
// refused by the reads and spends themselves: each checks the account
// as well as the record, and refuses without spending.
func TestDisabledAccountRefusedByItsReads(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	now := time.Now()
	u := addUser(t, s, "ann@example.com", false)
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	sess := auth.Session{UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	mustNil := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustNil(s.CreateSession(ctx, hash("s1"), sess, u.PasswordHash, u.SignOuts))
	mustNil(s.AddResetToken(ctx, hash("r1"), u.ID, now, now.Add(time.Hour), false))
	mustNil(s.AddUnlockToken(ctx, hash("u1"), u.ID, now, now.Add(time.Hour)))
	mustNil(s.AddSignInToken(ctx, hash("i1"), u.ID, u.PasswordHash, u.SignOuts, now, now.Add(time.Hour)))
	_, err := s.Pool().Exec(ctx, `UPDATE users SET disabled_at = $2 WHERE id = $1`, u.ID, now)
	mustNil(err)

	if _, err := s.SessionByHash(ctx, hash("s1"), now); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("session of a disabled account: %v, want ErrNoSession", err)
	}
	if _, _, err := s.ResetTokenUser(ctx, hash("r1"), now); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("reset link of a disabled account: %v, want ErrInvalidToken", err)
	}
	if _, _, err := s.ResetPassword(ctx, hash("r1"), now, "$argon2id$new"); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("reset by a disabled account's link: %v, want ErrInvalidToken", err)
	}
	if _, _, err := s.UseUnlockToken(ctx, hash("u1"), now, hash("d1"), 10); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("unlock by a disabled account's link: %v, want ErrInvalidToken", err)
	}
	if email, err := s.SignInTokenLive(ctx, hash("i1"), now); err != nil || email != "" {
		t.Errorf("sign-in link of a disabled account: %q %v, want none", email, err)
	}
	if _, err := s.UseSignInToken(ctx, hash("i1"), now, hash("d2"), 10); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("sign-in by a disabled account's link: %v, want ErrInvalidToken", err)
	}
	// Nothing was spent or replaced: enabled again, it is as it was.
	if _, err := s.EnableUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, hash("s1"), now); err != nil {
		t.Errorf("session once enabled: %v", err)
	}
	if _, _, err := s.ResetPassword(ctx, hash("r1"), now, "$argon2id$new"); err != nil {
		t.Errorf("reset link once enabled: %v", err)
	}
}

// TestDisableUser: disabling ends the account's sessions, forgets its
// devices, spends its links, and from then on no session is made or
// found for it and no link of it works; enabling lets it sign in again.
func TestDisableUser(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	now := time.Now()
	u := addUser(t, s, "ann@example.com", false)
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	sess := auth.Session{UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := s.CreateSession(ctx, hash("s1"), sess, u.PasswordHash, u.SignOuts); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDevice(ctx, u.ID, "", 0, hash("d1"), now, 10, false); err != nil {
		t.Fatal(err)
	}
	if err := s.AddResetToken(ctx, hash("r1"), u.ID, now, now.Add(time.Hour), false); err != nil {
		t.Fatal(err)
	}
	if err := s.AddUnlockToken(ctx, hash("u1"), u.ID, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSignInToken(ctx, hash("i1"), u.ID, u.PasswordHash, u.SignOuts, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	challenge := func(token string) auth.MFAChallenge {
		return auth.MFAChallenge{TokenHash: hash(token), BindingHash: hash("b"), UserID: u.ID,
			PasswordHash: u.PasswordHash, CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
	}
	if err := s.AddMFAChallenge(ctx, challenge("m1")); err != nil {
		t.Fatal(err)
	}
	d, err := s.DisableUser(ctx, u.ID, now)
	if err != nil || !d.Disabled() {
		t.Fatalf("DisableUser: %+v %v", d, err)
	}
	if _, err := s.SessionByHash(ctx, hash("s1"), now); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("session after disabling: %v", err)
	}
	if known, _ := s.KnownDevice(ctx, u.Email, hash("d1"), now.Add(-time.Hour)); known {
		t.Error("device still known after disabling")
	}
	// The links pending as it was disabled, read when.
	earlierLinksDead := func(when string) {
		t.Helper()
		if _, _, err := s.ResetTokenUser(ctx, hash("r1"), now); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("reset link from before disabling, %s: %v", when, err)
		}
		if live, _ := s.UnlockTokenLive(ctx, hash("u1"), now); live {
			t.Errorf("unlock link from before disabling live %s", when)
		}
		if email, _ := s.SignInTokenLive(ctx, hash("i1"), now); email != "" {
			t.Errorf("sign-in link from before disabling live %s", when)
		}
	}
	earlierLinksDead("while disabled")
	// Links made after (a request that raced the disabling) are not
	// stored: they would work again once the account is enabled.
	if err := s.AddResetToken(ctx, hash("r2"), u.ID, now, now.Add(time.Hour), false); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("reset link stored for a disabled account: %v, want ErrNoUser", err)
	}
	if err := s.AddUnlockToken(ctx, hash("u2"), u.ID, now, now.Add(time.Hour)); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("unlock link stored for a disabled account: %v, want ErrNoUser", err)
	}
	if _, err := s.EnableUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	// The links pending as it was disabled were spent, not merely
	// refused while it is: enabled again, they still do nothing.
	earlierLinksDead("once enabled")
	if _, _, err := s.ResetPassword(ctx, hash("r2"), now, "$argon2id$new"); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("reset link made while disabled, once enabled: %v", err)
	}
	if _, _, err := s.UseUnlockToken(ctx, hash("u2"), now, hash("d2"), 10); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("unlock link made while disabled, once enabled: %v", err)
	}
	if _, err := s.DisableUser(ctx, u.ID, now); err != nil {
		t.Fatal(err)
	}
	// A held sign-in's link, made as the account is disabled, is not
	// stored either: it too would work again once the account is enabled.
	if err := s.AddSignInToken(ctx, hash("i2"), u.ID, u.PasswordHash, u.SignOuts, now, now.Add(time.Hour)); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("sign-in link stored for a disabled account: %v, want ErrNoUser", err)
	}
	if _, err := s.UseSignInToken(ctx, hash("i2"), now, hash("d3"), 10); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("sign-in link of a disabled account: %v", err)
	}
	if _, err := s.EnableUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UseSignInToken(ctx, hash("i2"), now, hash("d3"), 10); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("sign-in link made while disabled, once enabled: %v", err)
	}
	if _, err := s.DisableUser(ctx, u.ID, now); err != nil {
		t.Fatal(err)
	}
	// A second step pending as the account was disabled is gone, and one
	// begun by a sign-in that raced the disabling is no step either: a
	// code typed into it is never checked (nor a recovery code spent).
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM mfa_challenges WHERE user_id = $1`, u.ID).Scan(&left); err != nil || left != 0 {
		t.Errorf("second steps left after disabling: %d %v", left, err)
	}
	if err := s.AddMFAChallenge(ctx, challenge("m2")); !errors.Is(err, auth.ErrPasswordChanged) {
		t.Errorf("second step stored for a disabled account: %v, want ErrPasswordChanged", err)
	}
	if _, err := s.MFAChallenge(ctx, hash("m2"), hash("b"), now); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("second step of a disabled account: %v", err)
	}
	if _, err := s.ConsumeMFAChallenge(ctx, hash("m2"), hash("b"), now); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("second step of a disabled account spent: %v", err)
	}
	// A sign-in whose password was verified before the disabling adds no
	// known device after it, as it makes no session.
	if err := s.AddDevice(ctx, u.ID, u.PasswordHash, u.SignOuts, hash("d4"), now, 10, false); !errors.Is(err, auth.ErrPasswordChanged) {
		t.Errorf("device added to a disabled account: %v", err)
	}
	if err := s.CreateSession(ctx, hash("s2"), sess, u.PasswordHash, u.SignOuts); !errors.Is(err, auth.ErrPasswordChanged) {
		t.Errorf("session for a disabled account: %v", err)
	}
	if got, err := s.UserByEmail(ctx, u.Email); err != nil || !got.Disabled() {
		t.Errorf("UserByEmail of a disabled account: %+v %v", got, err)
	}
	e, err := s.EnableUser(ctx, u.ID)
	if err != nil || e.Disabled() {
		t.Fatalf("EnableUser: %+v %v", e, err)
	}
	// Nor, once it is enabled, does that step work: it was not stored.
	if _, err := s.MFAChallenge(ctx, hash("m2"), hash("b"), now); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("second step begun while disabled, once enabled: %v", err)
	}
	// Nor a session of a sign-in verified before the disabling: it
	// counted a sign-out. One verified after enabling is made.
	if err := s.CreateSession(ctx, hash("s3"), sess, u.PasswordHash, u.SignOuts); !errors.Is(err, auth.ErrPasswordChanged) {
		t.Errorf("session of a sign-in verified before the disabling, once enabled: %v, want ErrPasswordChanged", err)
	}
	if err := s.CreateSession(ctx, hash("s3"), sess, e.PasswordHash, e.SignOuts); err != nil {
		t.Errorf("session after enabling: %v", err)
	}
}

// TestDeleteUserKeepsEvents: an account with a row in every table that
// refers to accounts is deleted without a foreign key refusing it; its
// security events and lockout records stay.
func TestDeleteUserKeepsEvents(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	now := time.Now()
	u := addUser(t, s, "ann@example.com", false)
	addUser(t, s, "root@example.com", true)
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.CreateSession(ctx, hash("s"), auth.Session{UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, u.PasswordHash, u.SignOuts))
	must(s.AddDevice(ctx, u.ID, "", 0, hash("d"), now, 10, false))
	must(s.AddResetToken(ctx, hash("r"), u.ID, now, now.Add(time.Hour), true))
	must(s.AddUnlockToken(ctx, hash("u"), u.ID, now, now.Add(time.Hour)))
	must(s.AddSignInToken(ctx, hash("i"), u.ID, u.PasswordHash, u.SignOuts, now, now.Add(time.Hour)))
	must(s.RecordLockout(ctx, auth.Lockout{Account: u.Email, UserID: u.ID, Level: 1, LockedAt: now, LockedUntil: now.Add(time.Hour)}))
	must(s.InsertEvents(ctx, auth.NewEventBatchID(), []auth.Event{{At: now, Kind: auth.EventLoginSucceeded, Account: u.Email, UserID: u.ID}}))
	factor, err := s.AddFactor(ctx, auth.Factor{UserID: u.ID, Kind: auth.FactorTOTP, Name: "Phone", Secret: []byte("k"), CreatedAt: now})
	must(err)
	_, err = s.ConfirmFactor(ctx, u.ID, factor, 1, [][]byte{hash("c")}, now, verified(u))
	must(err)
	must(s.AddMFAChallenge(ctx, auth.MFAChallenge{TokenHash: hash("m"), BindingHash: hash("b"), UserID: u.ID,
		PasswordHash: u.PasswordHash, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
	_, _, err = s.AddPasskey(ctx, auth.Passkey{UserID: u.ID, Name: "Laptop", CredentialID: []byte("c"), PublicKey: []byte("k")},
		[][]byte{hash("rc")}, now, verified(u))
	must(err)
	must(s.AddCeremony(ctx, auth.Ceremony{BindingHash: hash("w"), Purpose: "register", UserID: u.ID, Session: []byte("{}"),
		ExpiresAt: now.Add(time.Hour)}))

	// Every table with a foreign key to users is covered above: a new one
	// fails this test until it is.
	rows, err := s.Pool().Query(ctx, `SELECT conrelid::regclass::text FROM pg_constraint
		WHERE contype = 'f' AND confrelid = 'users'::regclass ORDER BY 1`)
	must(err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	must(err)
	if want := []string{"devices", "lockouts", "mfa_challenges", "password_reset_tokens", "recovery_codes", "second_factors",
		"sessions", "sign_in_tokens", "unlock_tokens", "webauthn_ceremonies"}; !slices.Equal(tables, want) {
		t.Errorf("tables referring to users: %v, want %v", tables, want)
	}

	if _, err := s.DeleteUser(ctx, u.ID); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	var events, lockouts int
	must(s.Pool().QueryRow(ctx, `SELECT count(*) FROM security_events WHERE account_key = $1`, u.Email).Scan(&events))
	must(s.Pool().QueryRow(ctx, `SELECT count(*) FROM lockouts WHERE account_key = $1`, u.Email).Scan(&lockouts))
	if events != 1 || lockouts != 1 {
		t.Errorf("after deleting: %d events and %d lockouts of the account, want 1 and 1", events, lockouts)
	}
	if _, err := s.UserByID(ctx, u.ID); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("UserByID after deleting: %v", err)
	}
}

// TestLockoutOfADeletedAccount: a lockout decided on an account that is
// deleted before its row is written is recorded all the same, under its
// address and without the id, as the row would be had it been written
// first (ON DELETE SET NULL). The lock itself is in force in Redis; a
// foreign key that refused the row would leave it out of the dashboard's
// lockouts.
func TestLockoutOfADeletedAccount(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	u := addUser(t, s, "ann@example.com", false)
	addUser(t, s, "root@example.com", true)
	if _, err := s.DeleteUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordLockout(ctx, auth.Lockout{Account: u.Email, UserID: u.ID, Level: 1, Failures: 5,
		LockedAt: now, LockedUntil: now.Add(time.Hour)}); err != nil {
		t.Fatalf("RecordLockout: %v", err)
	}
	l, ok, err := s.AccountLockout(ctx, u.Email, now)
	if err != nil || !ok || l.UserID != 0 || !l.LockedUntil.Equal(now.Add(time.Hour)) {
		t.Errorf("AccountLockout = %+v, %v, %v; want the lockout, without an account id", l, ok, err)
	}
}

// seedUsers adds n accounts in one statement (user0000042@example.com
// and so on, a thousand of them administrators), then ANALYZE, as
// autovacuum would.
func seedUsers(t testing.TB, s *postgres.Store, n int) {
	t.Helper()
	ctx := t.Context()
	if _, err := s.Pool().Exec(ctx, `
		INSERT INTO users (email, password_hash, is_admin)
		SELECT 'user' || lpad(g::text, 7, '0') || '@example.com', '$argon2id$v=19$m=1,t=1,p=1$c2FsdA$aGFzaA', g % 100 = 0
		FROM generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE users`); err != nil {
		t.Fatal(err)
	}
}

// userPlan lists the nodes of the plan of a page of SearchUsers, as
// planNodes does for events.
func userPlan(t testing.TB, s *postgres.Store, prefix, after string) []string {
	t.Helper()
	sql, args := postgres.SearchUsersQuery(prefix, after, 51)
	var raw []byte
	if err := s.Pool().QueryRow(t.Context(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plan []struct{ Plan node }
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n node)
	walk = func(n node) {
		s := n.NodeType
		if n.IndexName != "" {
			s += " on " + n.IndexName
		}
		out = append(out, s)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plan[0].Plan)
	return out
}

// TestSearchUsersPlans: among 100,000 accounts, every page of the list and
// of a prefix search, first or later, reads users_email_c_idx in order and
// never the whole table.
func TestSearchUsersPlans(t *testing.T) {
	s := newStore(t)
	seedUsers(t, s, 100_000)
	for _, c := range []struct{ prefix, after string }{
		{"", ""},
		{"", "user0050000@example.com"},
		{"user00123", ""},
		{"user00123", "user0012345@example.com"},
		{"nobody", ""},
	} {
		nodes := userPlan(t, s, c.prefix, c.after)
		if !slices.Contains(nodes, "Index Scan on users_email_c_idx") {
			t.Errorf("%+v: plan %v does not scan users_email_c_idx", c, nodes)
		}
		for _, n := range nodes {
			if strings.Contains(n, "Seq Scan") || n == "Sort" {
				t.Errorf("%+v: plan %v has %s", c, nodes, n)
			}
		}
		start := time.Now()
		got, err := s.SearchUsers(t.Context(), c.prefix, c.after, 51)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v: %d accounts in %v, plan %v", c, len(got), time.Since(start), nodes)
	}
}

// BenchmarkSearchUsers reads a page of the list and of a prefix search,
// first and later, among 100,000 accounts.
func BenchmarkSearchUsers(b *testing.B) {
	_, pool := testenv.Schema(b)
	s := postgres.New(pool)
	start := time.Now()
	seedUsers(b, s, 100_000)
	b.Logf("seeded 100,000 accounts in %v", time.Since(start))
	for _, c := range []struct{ name, prefix, after string }{
		{"list", "", ""},
		{"list-later", "", "user0050000@example.com"},
		{"prefix", "user00123", ""},
		{"prefix-later", "user00123", "user0012345@example.com"},
		{"prefix-none", "nobody", ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.Logf("plan %v", userPlan(b, s, c.prefix, c.after))
			for b.Loop() {
				if _, err := s.SearchUsers(b.Context(), c.prefix, c.after, 51); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPrefixEnd: the bound above a prefix is the least string past every
// string that starts with it, valid UTF-8 at every edge.
func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		prefix, want string
		ok           bool
	}{
		{"", "", false},
		{"ann", "ano", true},
		{"an\u007f", "an\u0080", true},
		{"z\ud7ff", "z\ue000", true},
		{"z\U0010ffff", "{", true},
		{"\U0010ffff\U0010ffff", "", false},
	} {
		got, ok := postgres.PrefixEnd(c.prefix)
		if got != c.want || ok != c.ok {
			t.Errorf("PrefixEnd(%q) = %q, %v; want %q, %v", c.prefix, got, ok, c.want, c.ok)
		}
	}
}

// TestSignOutEverywhereEndsSecondSteps: signing an account out everywhere
// (the account page's action, xcloak user signout) also ends its pending
// second steps, each of which would otherwise become a session after it.
func TestSignOutEverywhereEndsSecondSteps(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	now := time.Now()
	u := addUser(t, s, "ann@example.com", false)
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	if err := s.AddMFAChallenge(ctx, auth.MFAChallenge{TokenHash: hash("m"), BindingHash: hash("b"), UserID: u.ID,
		PasswordHash: u.PasswordHash, CreatedAt: now, ExpiresAt: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SignOutEverywhere(ctx, u.Email); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MFAChallenge(ctx, hash("m"), hash("b"), now); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("second step after signing out everywhere: %v", err)
	}
}
