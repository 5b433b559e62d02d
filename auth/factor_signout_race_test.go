package auth_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/app"
)

// TestFactorChangeAcrossSignOut: whoever has the password and a session
// removes the owner's passkey, or makes new recovery codes, while the
// owner signs out the other browsers. The change checked the password
// before the sign-out ended its session; it is not stored after it, as a
// factor added across a sign-out is not: a removal would leave the
// account to the password alone, and new codes in the attacker's hands
// would pass its second step.
func TestFactorChangeAcrossSignOut(t *testing.T) {
	for _, change := range []string{"remove", "recovery"} {
		t.Run(change, func(t *testing.T) {
			var hasher *auth.Hasher
			f := newFixture(t, nil, func(d *app.Deps) { hasher = d.Hasher })
			ctx := t.Context()
			const email = "owner@example.com"
			f.addUser(t, email, passkeyPassword, false)

			// The attacker signed in with the password before the owner
			// added a passkey.
			evil, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: passkeyPassword, Client: client("203.0.113.66")})
			if err != nil {
				t.Fatal(err)
			}
			owner, err := f.svc.Login(ctx, auth.LoginRequest{Email: email, Password: passkeyPassword, Client: client("192.0.2.10")})
			if err != nil {
				t.Fatal(err)
			}
			c, err := f.svc.BeginPasskey(ctx, owner.Session, client("192.0.2.10"))
			if err != nil {
				t.Fatal(err)
			}
			k := authtest.NewSoftKey(t)
			mine := auth.FactorChange{Session: owner.Session.Token, Password: passkeyPassword, Client: client("192.0.2.10"), DeviceCookie: owner.Device.Value}
			codes, err := f.svc.FinishPasskey(ctx, mine, c.Binding, "Laptop", []byte(k.Create(t, optionsJSON(t, c))))
			if err != nil || len(codes) == 0 {
				t.Fatalf("FinishPasskey: %d codes, %v", len(codes), err)
			}
			factors, _, err := f.svc.AccountFactors(ctx, owner.Session)
			if err != nil || len(factors) != 1 {
				t.Fatalf("factors: %v, %v", factors, err)
			}

			// The attacker's change checks the password: held in its hash
			// slot, after the session was read.
			release := auth.HoldHashes(hasher)
			defer release()
			done := make(chan error, 1)
			go func() {
				ch := auth.FactorChange{Session: evil.Session.Token, Password: passkeyPassword, Client: client("203.0.113.66"), DeviceCookie: evil.Device.Value}
				if change == "remove" {
					done <- f.svc.RemoveFactor(ctx, ch, factors[0].ID)
					return
				}
				_, err := f.svc.RegenerateRecoveryCodes(ctx, ch)
				done <- err
			}()
			waitUntil(t, "the change's password check in flight", func() bool { return hasher.Stats().Running == 1 })

			// Meanwhile the owner signs the other browsers out.
			if _, err := f.svc.EndOtherSessions(ctx, owner.Session, owner.Session.Token, client("192.0.2.10")); err != nil {
				t.Fatal(err)
			}
			release()
			if err := <-done; !errors.Is(err, auth.ErrNoSession) {
				t.Errorf("the signed-out session's %s, finished after the sign-out: %v, want ErrNoSession", change, err)
			}
			factors, left, err := f.svc.AccountFactors(ctx, owner.Session)
			if err != nil {
				t.Fatal(err)
			}
			first := sha256.Sum256([]byte(strings.ReplaceAll(codes[0], "-", "")))
			var owners int
			if err := f.db.QueryRow(ctx, `SELECT count(*) FROM recovery_codes WHERE user_id = $1 AND hash = $2 AND used_at IS NULL`,
				owner.Session.UserID, first[:]).Scan(&owners); err != nil {
				t.Fatal(err)
			}
			if len(factors) != 1 || left != auth.RecoveryCodes || owners != 1 {
				t.Errorf("after the signed-out session's %s: %d factors, %d recovery codes left, the owner's first one kept: %t; want the passkey and the owner's %d codes",
					change, len(factors), left, owners == 1, auth.RecoveryCodes)
			}
		})
	}
}
