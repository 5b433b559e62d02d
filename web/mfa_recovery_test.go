package web_test

import (
	"crypto/sha256"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// newRecoveryCodes asks for new recovery codes from c with password and
// returns the answer and the codes it shows.
func newRecoveryCodes(t *testing.T, c *http.Client, base, password string) (int, []string) {
	t.Helper()
	resp, page := post(t, c, base+"/account/mfa/recovery", formType, url.Values{"password": {password}}.Encode())
	var codes []string
	for _, m := range recoveryRe.FindAllStringSubmatch(page, -1) {
		codes = append(codes, m[1])
	}
	return resp.StatusCode, codes
}

// recoveryHashes are the hashes of codes as stored, sorted.
func recoveryHashes(codes []string) []string {
	var out []string
	for _, c := range codes {
		sum := sha256.Sum256([]byte(strings.ReplaceAll(c, "-", "")))
		out = append(out, string(sum[:]))
	}
	slices.Sort(out)
	return out
}

// mailWith waits for a mail to to whose subject holds subject, among
// others in any order.
func mailWith(t *testing.T, env *xcloaktest.Env, to, subject string) testenv.Mail {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, m := range env.Mail.Messages() {
			if slices.Contains(m.To, to) && strings.Contains(m.Subject, subject) {
				return m
			}
		}
	}
	t.Fatalf("no mail to %s about %q", to, subject)
	return testenv.Mail{}
}

// TestRecoveryCodesRegenerated: new recovery codes take the password
// again, replace all ten at once (the old ones stop working, the new ones
// work once), are shown once, recorded each time, and mailed to the owner;
// regenerations at once leave exactly one of the sets shown.
func TestRecoveryCodesRegenerated(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "rena@example.test", false)

	if _, page := get(t, u.browser, base+"/account/mfa"); !strings.Contains(page, `action="/account/mfa/recovery"`) {
		t.Fatalf("the factors page offers no new recovery codes")
	}
	if status, codes := newRecoveryCodes(t, u.browser, base, "not the password"); status != http.StatusUnauthorized || len(codes) != 0 {
		t.Fatalf("wrong password: %d, %d codes; want 401 and none", status, len(codes))
	}
	status, fresh := newRecoveryCodes(t, u.browser, base, u.password)
	if status != http.StatusOK || len(fresh) != auth.RecoveryCodes {
		t.Fatalf("new recovery codes: %d, %d codes; want 200 and %d", status, len(fresh), auth.RecoveryCodes)
	}
	for _, c := range fresh {
		if slices.Contains(u.recovery, c) {
			t.Fatalf("new code %s was an old one", c)
		}
	}
	c := xcloaktest.Client(t, "127.0.38.1")
	if status, body := mfaJSON(t, c, base, mfaLoginJSON(t, c, base, u), u.recovery[0]); status != http.StatusUnauthorized {
		t.Errorf("an old recovery code after new ones: %d %s; want 401", status, body)
	}
	if status, body := mfaJSON(t, c, base, mfaLoginJSON(t, c, base, u), fresh[0]); status != http.StatusOK {
		t.Errorf("a new recovery code: %d %s; want 200", status, body)
	}
	d := xcloaktest.Client(t, "127.0.38.2")
	if status, body := mfaJSON(t, d, base, mfaLoginJSON(t, d, base, u), fresh[0]); status != http.StatusUnauthorized {
		t.Errorf("the new recovery code again: %d %s; want 401", status, body)
	}

	// The owner is told.
	if m := mailWith(t, env, u.email, "recovery codes"); !strings.Contains(strings.ToLower(m.Body), "new recovery codes") {
		t.Errorf("mail %q: %s; want one of new recovery codes", m.Subject, m.Body)
	}

	// Regenerations at once: one set of ten stays, and it is one shown.
	const racers = 6
	sets := make([][]string, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			status, codes := newRecoveryCodes(t, u.browser, base, u.password)
			if status != http.StatusOK || len(codes) != auth.RecoveryCodes {
				t.Errorf("regeneration %d: %d, %d codes", i, status, len(codes))
			}
			sets[i] = codes
		})
	}
	wg.Wait()
	var stored []string
	rows, err := env.DB.Query(t.Context(), `SELECT r.hash FROM recovery_codes r JOIN users u ON u.id = r.user_id WHERE u.email = $1`, u.email)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, string(h))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	slices.Sort(stored)
	if len(stored) != auth.RecoveryCodes {
		t.Fatalf("%d recovery codes stored after %d regenerations at once, want %d", len(stored), racers, auth.RecoveryCodes)
	}
	matched := 0
	for _, set := range sets {
		if slices.Equal(recoveryHashes(set), stored) {
			matched++
		}
	}
	if matched != 1 {
		t.Errorf("the stored codes are %d of the sets shown, want exactly 1", matched)
	}

	// Each regeneration is its own event, never folded.
	env.Flush(t)
	var events int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM security_events e JOIN users u ON u.id = e.user_id WHERE e.kind = $1 AND u.email = $2`,
		auth.EventRecoveryCodesRegenerated, u.email).Scan(&events); err != nil || events != 1+racers {
		t.Errorf("%d regeneration events (%v), want %d", events, err, 1+racers)
	}
}

// TestRecoveryCodesNeedAFactor: an account without a factor has no
// recovery codes to regenerate.
func TestRecoveryCodesNeedAFactor(t *testing.T) {
	env, base, _ := mfaEnv(t, xcloaktest.Options{})
	env.AddUser(t, "nofa@example.test", "correct horse battery", false)
	c := xcloaktest.Client(t, "127.0.38.3")
	postSignIn(t, c, base, "nofa@example.test", "correct horse battery")
	if _, page := get(t, c, base+"/account/mfa"); strings.Contains(page, `action="/account/mfa/recovery"`) {
		t.Errorf("the factors page of an account without a factor offers recovery codes")
	}
	status, codes := newRecoveryCodes(t, c, base, "correct horse battery")
	if status == http.StatusOK || len(codes) != 0 {
		t.Errorf("new recovery codes without a factor: %d, %d codes; want a refusal", status, len(codes))
	}
	var n int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM recovery_codes r JOIN users u ON u.id = r.user_id WHERE u.email = $1`,
		"nofa@example.test").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d recovery codes stored (%v), want 0", n, err)
	}
}
