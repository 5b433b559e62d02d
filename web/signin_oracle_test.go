package web_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// The accounts of the plain sign-in's cases. Their addresses have the
// same length, so that the form, which echoes the address typed, answers
// each with the same Content-Length; the address itself is masked.
const (
	plainEmail    = "ann@example.com"
	unknownEmail  = "nob@example.com"
	disabledEmail = "dis@example.com"
	factorEmail   = "mfa@example.com"
	plainPassword = "the right password"
)

// plainSignInCases are the sign-ins that must all be answered 401 alike:
// (a) to (e) of docs/BENCHMARKS.md's "Sign-in: no timing oracle".
func plainSignInCases() []noOracleCase {
	return []noOracleCase{
		{"wrong password", plainEmail, "a wrong password"},
		{"unknown account", unknownEmail, plainPassword},
		{"disabled, right password", disabledEmail, plainPassword},
		{"disabled, wrong password", disabledEmail, "a wrong password"},
		{"factor, wrong password", factorEmail, "a wrong password"},
	}
}

// signInOracleEnv is an XCloak with the accounts of plainSignInCases: a
// plain one, a disabled one and one with an authenticator app.
func signInOracleEnv(tb testing.TB, opts xcloaktest.Options) *xcloaktest.Env {
	tb.Helper()
	env := xcloaktest.New(tb, opts)
	ctx := tb.Context()
	env.AddUser(tb, plainEmail, plainPassword, false)
	dis := env.AddUser(tb, disabledEmail, plainPassword, false)
	if _, err := env.Service.DisableUser(ctx, dis.ID, "cli"); err != nil {
		tb.Fatal(err)
	}
	env.AddUser(tb, factorEmail, plainPassword, false)
	owner := auth.Client{Addr: netip.MustParseAddr("127.0.42.250")}
	res, err := env.Service.Login(ctx, auth.LoginRequest{Email: factorEmail, Password: plainPassword, Client: owner})
	if err != nil {
		tb.Fatal(err)
	}
	e, err := env.Service.BeginTOTP(ctx, res.Session, auth.Client{Addr: netip.MustParseAddr("192.0.2.200")})
	if err != nil {
		tb.Fatal(err)
	}
	code, err := totp.GenerateCode(e.Secret, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := env.Service.ConfirmTOTP(ctx, auth.FactorChange{Session: res.Session.Token, Password: plainPassword, Client: owner}, e.ID, code); err != nil {
		tb.Fatal(err)
	}
	return env
}

// maskEmail is a's body with email masked: the form echoes the address
// typed, which its sender knows.
func maskEmail(a answer, email string) answer {
	a.body = strings.ReplaceAll(a.body, email, "EMAIL")
	return a
}

// TestSignInNoOracle: the plain sign-in, from the JSON API and from the
// form, answers a wrong password, an unknown account, a disabled
// account's right and wrong passwords and a wrong password of an account
// with a second factor alike: 401, the same headers (Set-Cookie and
// Content-Length included) and the same body byte for byte, but for the
// address the form echoes. Each comes from a browser of its own.
func TestSignInNoOracle(t *testing.T) {
	env := signInOracleEnv(t, xcloaktest.Options{})
	base := env.Start(t)
	for i, api := range []bool{true, false} {
		cases := plainSignInCases()
		answers := make([]answer, len(cases))
		for j, c := range cases {
			client := xcloaktest.Client(t, fmt.Sprintf("127.0.42.%d", 10*i+j+1))
			answers[j] = maskEmail(answerOf(postLogin(t, client, base, api, c.email, c.password)), c.email)
		}
		if answers[0].status != http.StatusUnauthorized {
			t.Fatalf("api=%v, %s: status %d, want 401:\n%s", api, cases[0].name, answers[0].status, answers[0].body)
		}
		for j, a := range answers[1:] {
			if a != answers[0] {
				t.Errorf("api=%v: the answer to the %s differs from the %s's:\n%d\n%s\n%s\nwant:\n%d\n%s\n%s", api, cases[j+1].name, cases[0].name,
					a.status, a.headers, a.body, answers[0].status, answers[0].headers, answers[0].body)
			}
		}
	}
}

// TestSignInLockoutNoOracle: an account that the lockout's threshold of
// wrong passwords locked and an unknown account sent as many are locked
// alike: each failure answered alike, then 429 with the same headers
// (Retry-After included) and body, from the JSON API and the form, for
// the right password as for a wrong one. Every request comes from a
// browser of its own, so that only the account's lockout can refuse it.
func TestSignInLockoutNoOracle(t *testing.T) {
	const threshold = 3
	env := signInOracleEnv(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Lockout.Threshold = threshold }})
	base := env.Start(t)
	ask := func(n int, api bool, email, password string) answer {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.43.%d", n))
		return maskEmail(answerOf(postLogin(t, c, base, api, email, password)), email)
	}
	same := func(what string, locked, unknown answer) {
		t.Helper()
		if locked != unknown {
			t.Errorf("%s: the unknown account's answer differs from the account's:\n%d\n%s\n%s\nwant:\n%d\n%s\n%s", what,
				unknown.status, unknown.headers, unknown.body, locked.status, locked.headers, locked.body)
		}
	}
	n := 0
	for k := range threshold {
		// A different wrong password each time: one retyped counts once.
		password := fmt.Sprintf("wrong password %d", k)
		n += 2
		same(fmt.Sprintf("failure %d", k+1), ask(n, k%2 == 0, plainEmail, password), ask(n+1, k%2 == 0, unknownEmail, password))
	}
	for _, api := range []bool{true, false} {
		for _, password := range []string{plainPassword, "yet another wrong password"} {
			var locked, unknown answer
			// Retry-After counts down the lock's seconds: asked again if
			// a second ended between the two requests.
			for range 3 {
				n += 2
				locked, unknown = ask(n, api, plainEmail, password), ask(n+1, api, unknownEmail, password)
				if locked == unknown || !retryAfterTicked(locked, unknown) {
					break
				}
			}
			if locked.status != http.StatusTooManyRequests {
				t.Fatalf("api=%v: the locked account answered %d, want 429:\n%s", api, locked.status, locked.body)
			}
			same(fmt.Sprintf("api=%v, locked, %q", api, password), locked, unknown)
		}
	}
}

// retryAfterTicked reports whether a and b differ only in their
// Retry-After, by one second, and in the body that repeats it.
func retryAfterTicked(a, b answer) bool {
	ra, rb := retryAfterRe.FindStringSubmatch(a.headers), retryAfterRe.FindStringSubmatch(b.headers)
	if ra == nil || rb == nil {
		return false
	}
	x, _ := strconv.Atoi(ra[1])
	y, _ := strconv.Atoi(rb[1])
	if x-y != 1 && y-x != 1 {
		return false
	}
	mask := func(a answer, s string) answer {
		a.headers = strings.ReplaceAll(a.headers, "Retry-After: "+s, "Retry-After: N")
		a.body = strings.ReplaceAll(a.body, s, "N")
		return a
	}
	return mask(a, ra[1]) == mask(b, rb[1])
}

var retryAfterRe = regexp.MustCompile(`(?m)^Retry-After: (\d+)$`)
