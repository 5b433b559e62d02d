package auth_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/app"
)

// afterQuery runs its hook once, after the first query whose SQL holds
// match ends, once armed: a change committed between two of a request's
// queries.
type afterQuery struct {
	match string
	armed atomic.Bool
	hook  func()
}

func (a *afterQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, a.match) {
		return context.WithValue(ctx, a, true)
	}
	return ctx
}

func (a *afterQuery) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(a) != nil && a.armed.CompareAndSwap(true, false) {
		a.hook()
	}
}

// TestPasskeyAloneRacingANewPassword: a passkey that a new password
// stopped signing in alone does not sign in when the new password is
// committed between the passkey's lookup and the account's: the sign-in
// must judge the passkey as it stood when it read the account, or it
// makes a session under the new password with a key the new password
// was to stop.
func TestPasskeyAloneRacingANewPassword(t *testing.T) {
	const email = "victim@example.com"
	var f *fixture
	race := &afterQuery{match: "f.credential_id = $1"}
	race.hook = func() {
		if err := f.svc.SetPassword(context.Background(), email, "the owner's brand new password", "cli"); err != nil {
			t.Errorf("SetPassword between the queries: %v", err)
		}
	}
	f = newFixture(t, nil, func(d *app.Deps) {
		cfg := d.Postgres.Config()
		cfg.ConnConfig.Tracer = race
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		d.Postgres = pool
	})
	k := authtest.NewSoftKey(t)
	f.passkeyUser(t, email, k)
	race.armed.Store(true)
	err := f.passkeyAlone(t, "192.0.2.93", func(o string) string { return k.Get(t, o, 1, nil) })
	if race.armed.Load() {
		t.Fatal("the passkey's lookup was not traced")
	}
	if err == nil {
		t.Fatal("the passkey signed in alone under the new password")
	}
}
