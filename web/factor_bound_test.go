package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestFactorsBoundTold: an account with auth.MaxFactors second factors
// begins no other, and its owner is told why, with 409 too_many_factors,
// before setting an authenticator up.
func TestFactorsBoundTold(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	u := env.AddUser(t, "ann@example.com", "ann password", false)
	b := newBrowser(t, "127.0.16.41", firefoxLinux)
	b.signIn(t, base, "ann@example.com", "ann password")
	if _, err := env.DB.Exec(t.Context(), `INSERT INTO second_factors (user_id, kind, name, secret, created_at, confirmed_at)
		SELECT $1, 'totp', 'app ' || i, '\x00'::bytea, now(), now() FROM generate_series(1, $2) AS i`, u.ID, auth.MaxFactors); err != nil {
		t.Fatal(err)
	}
	resp, body := b.send(t, http.MethodGet, base+"/account/mfa/totp", "", "")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "the most it may have") {
		t.Errorf("beginning a factor past the bound: %d, want 409 saying why", resp.StatusCode)
	}
	var pending int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM second_factors WHERE user_id = $1 AND confirmed_at IS NULL`, u.ID).Scan(&pending); err != nil || pending != 0 {
		t.Errorf("a factor begun past the bound: %d stored (%v)", pending, err)
	}
}
