package auth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// stallCommits makes every transaction that changes a row of table wait,
// as it commits, until release is called: a commit under way when its client
// hangs up. It returns a function that waits until a commit is stalled.
func stallCommits(t *testing.T, f *fixture, table string) (stalled func(), release func()) {
	t.Helper()
	const key = 77_003_411
	ctx := t.Context()
	for _, sql := range []string{
		// The cancel request a client that gives up sends is ignored, as
		// it is once a commit is being written.
		`CREATE FUNCTION stall_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			LOOP
				BEGIN
					PERFORM pg_advisory_xact_lock(77003411);
					RETURN NULL;
				EXCEPTION WHEN query_canceled THEN
				END;
			END LOOP;
		END $$`,
		`CREATE CONSTRAINT TRIGGER stall_commit AFTER INSERT OR UPDATE OR DELETE ON ` + table + `
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION stall_commit()`,
	} {
		if _, err := f.db.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := f.db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	released := false
	release = func() {
		if !released {
			released = true
			// Unlocked, then locked again once the stalled commit, which
			// waits first, has taken and let go of the lock: it is done.
			ctx := context.Background()
			holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
			holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, key)
			holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
			holder.Release()
		}
	}
	t.Cleanup(release)
	stalled = func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var waiting bool
			err := f.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
				AND objid = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`, key).Scan(&waiting)
			if err != nil {
				t.Fatal(err)
			}
			if waiting {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("no commit stalled within 10 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return stalled, release
}

// hangUpAtCommit runs change with a context its client cancels while the
// change's transaction commits, and returns what change returned.
func hangUpAtCommit(t *testing.T, f *fixture, table string, change func(ctx context.Context) error) error {
	t.Helper()
	stalled, release := stallCommits(t, f, table)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- change(ctx) }()
	stalled()
	cancel()
	// A change that gave up with its client has answered by now; one
	// that goes on waits for its commit.
	var err error
	returned := false
	select {
	case err = <-done:
		returned = true
	case <-time.After(300 * time.Millisecond):
	}
	release()
	if !returned {
		err = <-done
	}
	return err
}

// TestPasswordChangeNoticedWhenTheClientHangsUp: a password change stored
// as its client hangs up is recorded, and its owner mailed, as any other:
// whoever took the account over cannot change the password unnoticed by
// closing the connection as the change commits.
func TestPasswordChangeNoticedWhenTheClientHangsUp(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	before := len(mailsTo(t, f, "ann@example.com"))
	err = hangUpAtCommit(t, f, "users", func(ctx context.Context) error {
		_, err := f.svc.ChangePassword(ctx, auth.PasswordChange{Session: res.Session.Token, Current: "password123",
			New: "a new one, nowhere leaked", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value})
		return err
	})
	if _, lerr := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "a new one, nowhere leaked",
		Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}); lerr != nil {
		t.Fatalf("the new password after the change (%v): %v; want it stored", err, lerr)
	}
	if err != nil {
		t.Errorf("ChangePassword whose client hung up as it committed: %v; want it done", err)
	}
	var notices []string
	for _, m := range mailsTo(t, f, "ann@example.com")[before:] {
		if strings.Contains(strings.ToLower(m.Subject), "password") {
			notices = append(notices, m.Subject)
		}
	}
	if len(notices) != 1 {
		t.Fatalf("notices of the changed password: %q; want one", notices)
	}
}

// TestFactorNoticedWhenTheClientHangsUp: so is a second factor, which
// whoever took the account over could otherwise add unnoticed, keeping
// its owner out.
func TestFactorNoticedWhenTheClientHangsUp(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	ch := auth.FactorChange{Session: res.Session.Token, Password: "password123", Client: client("192.0.2.7"), DeviceCookie: res.Device.Value}
	enrol, err := f.svc.BeginTOTP(t.Context(), res.Session, client("192.0.2.200"))
	if err != nil {
		t.Fatal(err)
	}
	before := len(mailsTo(t, f, "ann@example.com"))
	err = hangUpAtCommit(t, f, "second_factors", func(ctx context.Context) error {
		_, err := f.svc.ConfirmTOTP(ctx, ch, enrol.ID, totpAt(t, enrol.Secret, time.Now()))
		return err
	})
	factors, _, ferr := f.svc.AccountFactors(t.Context(), res.Session)
	if ferr != nil || len(factors) != 1 {
		t.Fatalf("factors after the confirmation (%v): %+v, %v; want the one confirmed", err, factors, ferr)
	}
	if err != nil {
		t.Errorf("ConfirmTOTP whose client hung up as it committed: %v; want it done", err)
	}
	if got := mailsTo(t, f, "ann@example.com")[before:]; len(got) != 1 {
		t.Fatalf("%d notices of the factor added, want one", len(got))
	}
}

// TestOperatorActsRecordedWhenTheClientHangsUp: an administrator's act
// (or the command line's) stored as its client hangs up is recorded as
// any other, with its event and so its webhook: whoever holds an
// administrator's session cannot promote, unlock or sign someone out
// unseen by closing the connection as the change commits.
func TestOperatorActsRecordedWhenTheClientHangsUp(t *testing.T) {
	const by = "admin:root@example.com"
	cases := []struct {
		kind, table string
		before      func(t *testing.T, f *fixture, ann auth.User)
		act         func(ctx context.Context, f *fixture, ann auth.User) error
	}{
		{auth.EventUserCreated, "users", nil, func(ctx context.Context, f *fixture, _ auth.User) error {
			_, err := f.svc.CreateUser(ctx, "bob@example.com", "a password of bob's own", false, by)
			return err
		}},
		{auth.EventUserDisabled, "users", nil, func(ctx context.Context, f *fixture, ann auth.User) error {
			_, err := f.svc.DisableUser(ctx, ann.ID, by)
			return err
		}},
		{auth.EventUserEnabled, "users", func(t *testing.T, f *fixture, ann auth.User) {
			if _, err := f.svc.DisableUser(t.Context(), ann.ID, by); err != nil {
				t.Fatal(err)
			}
		}, func(ctx context.Context, f *fixture, ann auth.User) error {
			_, err := f.svc.EnableUser(ctx, ann.ID, by)
			return err
		}},
		{auth.EventUserPromoted, "users", nil, func(ctx context.Context, f *fixture, ann auth.User) error {
			_, err := f.svc.PromoteUser(ctx, ann.ID, by)
			return err
		}},
		{auth.EventUserDemoted, "users", func(t *testing.T, f *fixture, ann auth.User) {
			if _, err := f.svc.PromoteUser(t.Context(), ann.ID, by); err != nil {
				t.Fatal(err)
			}
		}, func(ctx context.Context, f *fixture, ann auth.User) error {
			_, err := f.svc.DemoteUser(ctx, ann.ID, by)
			return err
		}},
		{auth.EventPasswordSet, "users", nil, func(ctx context.Context, f *fixture, ann auth.User) error {
			return f.svc.SetPassword(ctx, ann.Email, "a password set for her", by)
		}},
		{auth.EventSignedOutEverywhere, "users", nil, func(ctx context.Context, f *fixture, ann auth.User) error {
			return f.svc.SignOutEverywhere(ctx, ann.Email, by)
		}},
		{auth.EventUserDeleted, "users", nil, func(ctx context.Context, f *fixture, ann auth.User) error {
			_, err := f.svc.DeleteUser(ctx, ann.ID, by)
			return err
		}},
		{auth.EventLockout, "lockouts", nil, func(ctx context.Context, f *fixture, ann auth.User) error {
			_, err := f.svc.LockUser(ctx, ann.ID, time.Hour, by)
			return err
		}},
		{auth.EventUnlock, "lockouts", func(t *testing.T, f *fixture, ann auth.User) {
			if _, err := f.svc.LockUser(t.Context(), ann.ID, time.Hour, by); err != nil {
				t.Fatal(err)
			}
		}, func(ctx context.Context, f *fixture, ann auth.User) error {
			_, err := f.svc.Unlock(ctx, ann.Email, by)
			return err
		}},
		{auth.EventFactorRemoved, "second_factors", func(t *testing.T, f *fixture, ann auth.User) {
			res, err := f.svc.Login(t.Context(), auth.LoginRequest{Email: ann.Email, Password: "password123", Client: client("192.0.2.7")})
			if err != nil {
				t.Fatal(err)
			}
			confirmTOTP(t, f, res)
		}, func(ctx context.Context, f *fixture, ann auth.User) error {
			_, err := f.svc.RemoveFactors(ctx, by, ann.Email)
			return err
		}},
		{auth.EventAPIKeyCreated, "api_keys", nil, func(ctx context.Context, f *fixture, _ auth.User) error {
			_, _, err := f.svc.AddAPIKey(ctx, "shop", by)
			return err
		}},
		{auth.EventAPIKeyRevoked, "api_keys", func(t *testing.T, f *fixture, _ auth.User) {
			if _, _, err := f.svc.AddAPIKey(t.Context(), "shop", by); err != nil {
				t.Fatal(err)
			}
		}, func(ctx context.Context, f *fixture, _ auth.User) error {
			return f.svc.RevokeAPIKey(ctx, "shop", by)
		}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			f := newFixture(t, nil)
			f.addUser(t, "root@example.com", "the root password", true)
			ann := f.addUser(t, "ann@example.com", "password123", false)
			if c.before != nil {
				c.before(t, f, ann)
			}
			if err := f.svc.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			before := len(eventsOfKinds(t, f, c.kind))
			err := hangUpAtCommit(t, f, c.table, func(ctx context.Context) error { return c.act(ctx, f, ann) })
			if err != nil {
				t.Errorf("act whose client hung up as it committed: %v; want it done", err)
			}
			if err := f.svc.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := len(eventsOfKinds(t, f, c.kind)) - before; got != 1 {
				t.Errorf("%d events of the act, want 1", got)
			}
		})
	}
}

// TestOwnerSessionActsRecordedWhenTheClientHangsUp: so is an owner's
// ending of sessions or forgetting of a device, which the account's
// activity lists: whoever holds a session cannot sign the owner's other
// browsers out unseen.
func TestOwnerSessionActsRecordedWhenTheClientHangsUp(t *testing.T) {
	cases := []struct {
		name, kind, table string
		act               func(ctx context.Context, f *fixture, sess auth.Session, token string, list auth.AccountSessions) error
	}{
		{"others ended", auth.EventSessionEnded, "sessions", func(ctx context.Context, f *fixture, sess auth.Session, token string, _ auth.AccountSessions) error {
			_, err := f.svc.EndOtherSessions(ctx, sess, token, client("192.0.2.7"))
			return err
		}},
		{"one ended", auth.EventSessionEnded, "sessions", func(ctx context.Context, f *fixture, sess auth.Session, token string, list auth.AccountSessions) error {
			_, err := f.svc.EndSession(ctx, sess, token, list.Sessions[len(list.Sessions)-1].PublicID, client("192.0.2.7"))
			return err
		}},
		{"device forgotten", auth.EventDeviceForgotten, "devices", func(ctx context.Context, f *fixture, sess auth.Session, token string, list auth.AccountSessions) error {
			return f.svc.ForgetDevice(ctx, sess, token, list.Devices[0].PublicID, client("192.0.2.7"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.addUser(t, "ann@example.com", "password123", false)
			var res auth.LoginResult
			for _, ip := range []string{"192.0.2.8", "192.0.2.7"} {
				var err error
				res, err = f.svc.Login(t.Context(), auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client(ip)})
				if err != nil {
					t.Fatal(err)
				}
			}
			sess, err := f.svc.Session(t.Context(), res.Session.Token)
			if err != nil {
				t.Fatal(err)
			}
			list, err := f.svc.ListSessions(t.Context(), sess, client("192.0.2.7"))
			if err != nil || len(list.Sessions) != 2 || len(list.Devices) == 0 {
				t.Fatalf("ListSessions = %+v, %v; want two sessions and a device", list, err)
			}
			if err := f.svc.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			before := len(eventsOfKinds(t, f, c.kind))
			err = hangUpAtCommit(t, f, c.table, func(ctx context.Context) error { return c.act(ctx, f, sess, res.Session.Token, list) })
			if err != nil {
				t.Errorf("act whose client hung up as it committed: %v; want it done", err)
			}
			if err := f.svc.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := len(eventsOfKinds(t, f, c.kind)) - before; got != 1 {
				t.Errorf("%d events of the act, want 1", got)
			}
		})
	}
}
