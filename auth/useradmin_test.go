package auth_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestDisabledSignInTakesTheWrongPasswordPath: a disabled account's
// right password is refused as a wrong one is, with the same error and
// the same event, and counts towards the lockout as a wrong one does:
// the lockout comes after the same number of tries either way.
func TestDisabledSignInTakesTheWrongPasswordPath(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "the right password", false)
	f.addUser(t, "bob@example.com", "the right password", false)
	if _, err := f.svc.DisableUser(ctx, ann.ID, "cli"); err != nil {
		t.Fatal(err)
	}
	// The same number of distinct tries on each: ann with her right
	// password (retyped it would count once, as a retyped wrong one does,
	// so each try here adds a character), bob with wrong ones.
	locked := map[string]int{}
	for _, email := range []string{"ann@example.com", "bob@example.com"} {
		for i := range 20 {
			password := "the right password" + string(rune('a'+i))
			if email == "ann@example.com" && i == 0 {
				password = "the right password"
			}
			_, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: password, Client: client("192.0.2.1")})
			if errors.Is(err, auth.ErrLimited) {
				locked[email] = i
				break
			}
			if !errors.Is(err, auth.ErrInvalidCredentials) {
				t.Fatalf("%s try %d: %v, want ErrInvalidCredentials", email, i, err)
			}
		}
	}
	if locked["ann@example.com"] == 0 || locked["ann@example.com"] != locked["bob@example.com"] {
		t.Errorf("locked after %v tries, want the same non-zero number for both", locked)
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{auth.EventLoginSucceeded, auth.EventNewDevice} {
		if n := countRows(t, f, "SELECT count(*) FROM security_events WHERE account_key = 'ann@example.com' AND kind = '"+kind+"'"); n != 0 {
			t.Errorf("%d %s events of the disabled account", n, kind)
		}
	}
	if a, b := countRows(t, f, `SELECT count(*) FROM security_events WHERE account_key = 'ann@example.com' AND kind = 'login_failed'`),
		countRows(t, f, `SELECT count(*) FROM security_events WHERE account_key = 'bob@example.com' AND kind = 'login_failed'`); a != b || a == 0 {
		t.Errorf("login_failed events: %d of the disabled account, %d of the wrong passwords", a, b)
	}
}

// TestDisabledAccountGetsNoMail: reset and unlock requests for a disabled
// account are accepted as for any address and mail nothing; an
// administrator's reset link is refused for it, and sent once it is
// enabled.
func TestDisabledAccountGetsNoMail(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "the right password", false)
	if _, err := f.svc.DisableUser(ctx, ann.ID, "cli"); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RequestReset(ctx, "ann@example.com", client("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RequestUnlock(ctx, "ann@example.com", client("192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SendResetLink(ctx, ann.ID, "cli"); !errors.Is(err, auth.ErrUserDisabled) {
		t.Errorf("SendResetLink of a disabled account: %v, want ErrUserDisabled", err)
	}
	f.waitResets(t)
	if m := f.mail.Messages(); len(m) != 0 {
		t.Fatalf("%d mails to a disabled account", len(m))
	}
	if _, err := f.svc.EnableUser(ctx, ann.ID, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SendResetLink(ctx, ann.ID, "admin:root@example.com"); err != nil {
		t.Fatal(err)
	}
	if body := f.mailBody(t, "ann@example.com"); !strings.Contains(body, "/password-reset/") {
		t.Errorf("reset mail without a link: %q", body)
	}
}

// TestDisableEndsProxySessions: a session the reverse proxies' cache
// holds stops passing as its account is disabled, and a sign-in after it
// is enabled again works with the same password.
func TestDisableEndsProxySessions(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "the right password", false)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "the right password", Client: client("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ProxySession(ctx, res.Session.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.DisableUser(ctx, ann.ID, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ProxySession(ctx, res.Session.Token); !errors.Is(err, auth.ErrNoSession) {
		t.Errorf("ProxySession after disabling: %v, want ErrNoSession", err)
	}
	if _, err := f.svc.EnableUser(ctx, ann.ID, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "the right password", Client: client("192.0.2.2")}); err != nil {
		t.Errorf("sign-in after enabling: %v", err)
	}
}

// TestDisableEndsHeldSignIns: a second step held for a new browser
// (attack mode) before the account was disabled does not sign in once it
// is enabled again, with any code: disabling ends the account's sign-ins
// under way as it ends its sessions, and its own second steps.
func TestDisableEndsHeldSignIns(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	res, _, codes := heldInAttackMode(t, f)
	step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("198.51.100.7")})
	if !errors.Is(err, auth.ErrVerificationRequired) || step.MFA.Token == "" {
		t.Fatalf("sign-in from a new browser in attack mode: %v, %+v; want a held second step", err, step.MFA)
	}
	if _, err := f.svc.DisableUser(ctx, res.Session.UserID, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.EnableUser(ctx, res.Session.UserID, "cli"); err != nil {
		t.Fatal(err)
	}
	signedIn, err := f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding,
		Code: codes[0], Client: client("198.51.100.7")})
	if err == nil || signedIn.Session.Token != "" {
		t.Errorf("the held second step of before the account was disabled, after it was enabled: %v, session %t; want refused",
			err, signedIn.Session.Token != "")
	}
}

// TestAdminActionsAreEvents: every action of account administration is
// one security event of its kind, naming the account and who did it.
func TestAdminActionsAreEvents(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	f.addUser(t, "root@example.com", "the right password", true)
	ann := f.addUser(t, "ann@example.com", "the right password", false)
	by := "admin:root@example.com"
	steps := []struct {
		kind string
		do   func() error
	}{
		{auth.EventUserDisabled, func() error { _, err := f.svc.DisableUser(ctx, ann.ID, by); return err }},
		{auth.EventUserEnabled, func() error { _, err := f.svc.EnableUser(ctx, ann.ID, by); return err }},
		{auth.EventUserPromoted, func() error { _, err := f.svc.PromoteUser(ctx, ann.ID, by); return err }},
		{auth.EventUserDemoted, func() error { _, err := f.svc.DemoteUser(ctx, ann.ID, by); return err }},
		{auth.EventLockout, func() error { _, err := f.svc.LockUser(ctx, ann.ID, time.Hour, by); return err }},
		{auth.EventUnlock, func() error { _, err := f.svc.Unlock(ctx, ann.Email, by); return err }},
		{auth.EventResetRequested, func() error { _, err := f.svc.SendResetLink(ctx, ann.ID, by); return err }},
		{auth.EventSignedOutEverywhere, func() error { return f.svc.SignOutEverywhere(ctx, ann.Email, by) }},
		{auth.EventUserDeleted, func() error { _, err := f.svc.DeleteUser(ctx, ann.ID, by); return err }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.kind, err)
		}
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if n := countRows(t, f, "SELECT count(*) FROM security_events WHERE account_key = 'ann@example.com' AND detail->>'by' = '"+by+"' AND kind = '"+s.kind+"'"); n != 1 {
			t.Errorf("%s: %d events by the administrator, want 1", s.kind, n)
		}
	}
	if _, err := f.svc.UserByID(ctx, ann.ID); !errors.Is(err, auth.ErrNoUser) {
		t.Errorf("after deleting: %v", err)
	}
}

// TestLockUser: an administrator's lock refuses the account's sign-ins
// from new browsers as a lockout does, until it is unlocked.
func TestLockUser(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "the right password", false)
	if _, err := f.svc.LockUser(ctx, ann.ID, time.Hour, "cli"); err != nil {
		t.Fatal(err)
	}
	login := func() error {
		_, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "the right password", Client: client("192.0.2.1")})
		return err
	}
	if err := login(); !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("sign-in while locked: %v, want ErrLimited", err)
	}
	d, err := f.svc.UserDetail(ctx, ann.ID)
	if err != nil || !d.Locked {
		t.Errorf("UserDetail while locked: %+v %v", d, err)
	}
	if _, err := f.svc.Unlock(ctx, ann.Email, "cli"); err != nil {
		t.Fatal(err)
	}
	if err := login(); err != nil {
		t.Errorf("sign-in after unlocking: %v", err)
	}
	for _, d := range []time.Duration{0, time.Second, auth.MaxAdminLock + time.Hour} {
		if _, err := f.svc.LockUser(ctx, ann.ID, d, "cli"); !errors.Is(err, auth.ErrInvalidRequest) {
			t.Errorf("lock for %s: %v, want ErrInvalidRequest", d, err)
		}
	}
}

// TestShorterLockKeepsTheLongerInForce: an administrator's lock shorter
// than the one in force leaves that one (Hold only lengthens a lock), and
// says so: the lockout log, and so the account's page and the lock's end,
// hold when the lock in force ends, not the shorter end asked for.
func TestShorterLockKeepsTheLongerInForce(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "the right password", false)
	before := time.Now()
	if _, err := f.svc.LockUser(ctx, ann.ID, 2*time.Hour, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.LockUser(ctx, ann.ID, time.Hour, "cli"); err != nil {
		t.Fatal(err)
	}
	d, err := f.svc.UserDetail(ctx, ann.ID)
	if err != nil || !d.Locked {
		t.Fatalf("UserDetail while locked: %+v %v", d, err)
	}
	if left := d.Lockout.LockedUntil.Sub(before); left < 2*time.Hour-time.Minute {
		t.Errorf("after a lock of 2h then one of 1h, the account's lock ends in %v, want 2h: the lock in force", left.Round(time.Second))
	}
}

// TestLockUserRecordedWhenLogRefuses: an administrator's lock is in
// force once the limits hold it; a lockout log that refuses its row (a
// database blip, or the account deleted a moment before) does not undo
// that, so the lock is still recorded as the administrator's act, as a
// lock by failures and an unlock are, and not answered as if nothing had
// happened.
func TestLockUserRecordedWhenLogRefuses(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "the right password", false)
	for _, sql := range []string{
		`CREATE FUNCTION refuse_lockout() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'lockout log unavailable'; END $$`,
		`CREATE TRIGGER refuse_lockout BEFORE INSERT ON lockouts FOR EACH ROW EXECUTE FUNCTION refuse_lockout()`,
	} {
		if _, err := f.db.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	const by = "admin:root@example.com"
	if _, err := f.svc.LockUser(ctx, ann.ID, time.Hour, by); err != nil {
		t.Errorf("lock whose log row was refused: %v, want it done", err)
	}
	_, err := f.svc.Login(ctx, auth.LoginRequest{Email: ann.Email, Password: "the right password", Client: client("192.0.2.1")})
	if !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("sign-in after the lock: %v, want ErrLimited: the lock is in force", err)
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, f, `SELECT count(*) FROM security_events WHERE account_key = 'ann@example.com'
		AND kind = '`+auth.EventLockout+`' AND detail->>'by' = '`+by+`'`); n != 1 {
		t.Errorf("%d lockout events by the administrator, want 1: a lock in force that nobody is recorded as making", n)
	}
}

// TestAdminActionsAreNeverFolded: an administrator's actions are each a
// row naming the account and who did it, however many in one minute (a
// script disabling a batch of accounts): the event budget folds what
// clients can cause at will, never the acts of administrators, whose
// rows are the audit trail and whose user.disabled and user.deleted
// webhooks name the account. Accounts and API keys made or revoked by the
// batch are not folded either.
func TestAdminActionsAreNeverFolded(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	f.addUser(t, "root@example.com", "the right password", true)
	ann := f.addUser(t, "ann@example.com", "the right password", false)
	by := "admin:root@example.com"
	rounds := auth.EventRowsPerNetwork
	for range rounds {
		for _, do := range []func() (auth.User, error){
			func() (auth.User, error) { return f.svc.DisableUser(ctx, ann.ID, by) },
			func() (auth.User, error) { return f.svc.EnableUser(ctx, ann.ID, by) },
			func() (auth.User, error) { return f.svc.PromoteUser(ctx, ann.ID, by) },
			func() (auth.User, error) { return f.svc.DemoteUser(ctx, ann.ID, by) },
		} {
			if _, err := do(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.svc.DeleteUser(ctx, ann.ID, by); err != nil {
		t.Fatal(err)
	}
	// Accounts and keys made in a batch, by a script, likewise.
	for i := range rounds {
		if _, err := f.svc.CreateUser(ctx, fmt.Sprintf("new%d@example.com", i), "the right password", false, by); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.svc.AddAPIKey(ctx, "shop", by); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.RevokeAPIKey(ctx, "shop", by); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]int{auth.EventUserDisabled: rounds, auth.EventUserEnabled: rounds,
		auth.EventUserPromoted: rounds, auth.EventUserDemoted: rounds, auth.EventUserDeleted: 1} {
		if n := countRows(t, f, "SELECT count(*) FROM security_events WHERE account_key = 'ann@example.com' AND detail->>'by' = '"+by+"' AND kind = '"+kind+"'"); n != want {
			t.Errorf("%s: %d rows by the administrator, want %d", kind, n, want)
		}
	}
	for _, kind := range []string{auth.EventUserCreated, auth.EventAPIKeyCreated, auth.EventAPIKeyRevoked} {
		if n := countRows(t, f, "SELECT count(*) FROM security_events WHERE detail->>'by' = '"+by+"' AND NOT detail ? 'folded' AND kind = '"+kind+"'"); n != rounds {
			t.Errorf("%s: %d rows by the administrator, want %d", kind, n, rounds)
		}
	}
}

// TestSearchUsersAfterFolded: a page continues after the account named
// however it was typed, as stored emails are lower case.
func TestSearchUsersAfterFolded(t *testing.T) {
	f := newFixture(t, nil)
	for _, email := range []string{"amy@example.com", "bea@example.com", "cid@example.com"} {
		f.addUser(t, email, "the right password", false)
	}
	page, err := f.svc.SearchUsers(t.Context(), "", " Bea@Example.com", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range page.Users {
		got = append(got, u.Email)
	}
	if strings.Join(got, " ") != "cid@example.com" {
		t.Errorf("after Bea@Example.com: %v, want [cid@example.com]", got)
	}
}

// TestLockUserRecordsNotTheLimitsWait: an account whose sign-ins are
// refused by its limit, not locked, has no lock in force to keep; an
// administrator's lock then records the end asked for, not when the
// limit has room again (remembered by the replica for a second after
// Redis said so).
func TestLockUserRecordsNotTheLimitsWait(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	ann := f.addUser(t, "ann@example.com", "the right password", false)
	limited := false
	for i := range 20 {
		_, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "the right password",
			Client: client(fmt.Sprintf("192.0.2.%d", i+1))})
		if errors.Is(err, auth.ErrLimited) {
			limited = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !limited {
		t.Fatal("the account's limit never refused a sign-in")
	}
	before := f.clock()
	if _, err := f.svc.LockUser(ctx, ann.ID, time.Minute, "cli"); err != nil {
		t.Fatal(err)
	}
	d, err := f.svc.UserDetail(ctx, ann.ID)
	if err != nil || !d.Locked {
		t.Fatalf("UserDetail while locked: %+v %v", d, err)
	}
	if left := d.Lockout.LockedUntil.Sub(before); left > 2*time.Minute {
		t.Errorf("a lock of 1m on an account at its limit recorded as ending in %v, the limit's wait", left.Round(time.Second))
	}
}
