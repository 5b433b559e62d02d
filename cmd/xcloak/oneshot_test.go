package main

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
)

// TestCommandsRunNoBackgroundWork: a user or apikey command acts once and
// does none of the server's recurring work. Against a store holding a
// security event older than the retention, an expired lockout whose end
// no one has recorded yet, and attack mode that the detector switched on
// longer ago than the (command's default) quiet period, each command
// leaves all three as they were: the running servers, with their own
// settings, own that work.
func TestCommandsRunNoBackgroundWork(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{
		{"user", "add", "--email", "new@example.com"},
		{"user", "unlock", "--email", "ann@example.com"},
		{"apikey", "add", "--name", "shop"},
	} {
		t.Run(cmd[0]+" "+cmd[1], func(t *testing.T) {
			t.Parallel()
			vars := storeSettings(t)
			if _, stderr, err := xcloak(t, vars, "", "migrate"); err != nil {
				t.Fatalf("migrate: %v\n%s", err, stderr)
			}
			conn := connect(t, vars["XCLOAK_DATABASE_URL"])
			if _, err := conn.Exec(t.Context(), `
				INSERT INTO security_events (at, kind, account_key) VALUES (now() - interval '100 days', 'login_failed', 'old@example.com');
				INSERT INTO lockouts (account_key, level, failures, locked_at, locked_until)
					VALUES ('locked@example.com', 1, 10, now() - interval '16 minutes', now() - interval '1 minute')`); err != nil {
				t.Fatal(err)
			}
			watch := automaticAttack(t, vars, time.Now().Add(-20*time.Minute))

			if _, stderr, err := xcloak(t, vars, "correct horse battery\n", cmd...); err != nil {
				t.Fatalf("%v: %v\nstderr:\n%s", cmd, err, stderr)
			}

			var oldEvents, ended int
			var cleared bool
			if err := conn.QueryRow(t.Context(), `SELECT
					(SELECT count(*) FROM security_events WHERE account_key = 'old@example.com'),
					(SELECT count(*) FROM security_events WHERE kind = $1),
					(SELECT cleared_at IS NOT NULL FROM lockouts WHERE account_key = 'locked@example.com')`,
				auth.EventLockoutEnded).Scan(&oldEvents, &ended, &cleared); err != nil {
				t.Fatal(err)
			}
			if oldEvents != 1 {
				t.Errorf("%d events older than the retention left, want 1: the command ran the janitor", oldEvents)
			}
			if cleared || ended != 0 {
				t.Errorf("expired lockout cleared %v, %d lockout_ended events; want neither: the command swept ended lockouts", cleared, ended)
			}
			st, err := watch.AttackStatus(t.Context(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if !st.Active {
				t.Error("attack mode ended: the command ran the attack watch")
			}
		})
	}
}

// automaticAttack switches attack mode on in the settings' Redis as the
// detector of a server would have at the time at, and returns a watch to
// read it with.
func automaticAttack(t *testing.T, vars map[string]string, at time.Time) *attack.Watch {
	t.Helper()
	opts, err := redis.ParseURL(vars["XCLOAK_REDIS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	w, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: rdb, Prefix: vars["XCLOAK_KEY_PREFIX"], Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 * attack.DefaultConfig().UnknownAccounts {
		w.Observe(auth.SignInAttempt{At: at, Account: fmt.Sprintf("x%d@example.com", i),
			Client: auth.Client{Addr: netip.AddrFrom4([4]byte{10, 0, byte(i), 1})}, Outcome: auth.OutcomeUnknownAccount})
	}
	if err := w.Tick(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	if st, err := w.AttackStatus(t.Context(), time.Now()); err != nil || !st.Active || st.Trigger != "automatic" {
		t.Fatalf("attack mode set up: %+v, %v; want it on, automatic", st, err)
	}
	return w
}
