package web_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// The second steps of sign-ins under way when an account's browsers are
// signed out: none signs in after it.

// TestSecondStepEndsWithTheOtherBrowsers: a sign-in whose password was
// verified and whose second step is pending is under way: when the owner
// signs the other browsers out, its code signs no one in.
func TestSecondStepEndsWithTheOtherBrowsers(t *testing.T) {
	env, base, clk := mfaEnv(t, xcloaktest.Options{})
	u := enrolTOTP(t, env, base, clk, "tara@example.test", false)
	intruder := xcloaktest.Client(t, "127.0.30.2")
	token := mfaLoginJSON(t, intruder, base, u) // password verified, second step pending
	// The owner, from the browser that enrolled, signs out the other browsers.
	if resp, body := post(t, u.browser, base+"/account/sessions/end-others", formType, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("end-others: %d %s", resp.StatusCode, body)
	}
	if status, body := mfaJSON(t, intruder, base, token, u.code(t)); status == 200 {
		t.Errorf("second step of a sign-in under way when the other browsers were signed out: %d %s; want it refused", status, body)
	}
}

// TestHeldStepEndsWithSignOutEverywhere: in attack mode a new browser
// with the right password gets a held answer whose code signs in. The
// held token is sealed, not stored; it holds a fingerprint of the
// account's sign-outs, so an administrator's "sign out everywhere" in
// between leaves its code nothing to finish.
func TestHeldStepEndsWithSignOutEverywhere(t *testing.T) {
	env, base, u := heldEnv(t, xcloaktest.Options{}, "held@example.test")
	c := xcloaktest.Client(t, "127.0.35.9")
	u.clk.Advance(30 * time.Second)
	token := heldJSON(t, c, base, u.email, u.password) // password verified, held
	if err := env.Service.SignOutEverywhere(t.Context(), u.email, "admin:root@example.test"); err != nil {
		t.Fatal(err)
	}
	if status, body := mfaJSON(t, c, base, token, u.code(t)); status == 200 {
		t.Errorf("held step of a sign-in under way during 'sign out everywhere': %d %s; want it refused", status, body)
	}
	if resp, _ := get(t, c, base+"/account"); resp.StatusCode == http.StatusOK {
		t.Errorf("the browser has a live session after 'sign out everywhere'")
	}
}
