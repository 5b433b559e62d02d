package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/ratelimit"
)

// Low limits so that a three-second attack meets all of them.
const (
	testAccountLimit = 3
	testAccounts     = 4
)

func TestHTTPAgainstXCloak(t *testing.T) {
	tests := []struct {
		name      string
		passwords int
		plant     bool
		wantFound int
		// wantLockouts: every account that never signed in is locked.
		wantLockouts int
	}{
		{name: "limits hold", passwords: 6, wantFound: 0, wantLockouts: testAccounts},
		// With fewer passwords than the account limit, the planted one is
		// reached: the limiter does not stop a lucky guess within the limit.
		{name: "planted password found", passwords: 2, plant: true, wantFound: 1, wantLockouts: testAccounts - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) {
				c.Limits[auth.RuleLoginAccount] = ratelimit.Limit{Count: testAccountLimit, Window: 10 * time.Minute}
				c.Limits[auth.RuleLoginIP] = ratelimit.Limit{Count: 20, Window: 10 * time.Minute}
				c.Lockout.Threshold = testAccountLimit
			}})
			url := env.Start(t)
			env.AddUser(t, "legit@example.org", "legit-password-1", false)
			const planted = "planted-password-1"
			if tt.plant {
				env.AddUser(t, "user0@example.com", planted, false)
			}
			args := []string{"http", "--json", "--target", url,
				"--accounts", fmt.Sprint(testAccounts), "--passwords", fmt.Sprint(tt.passwords),
				"--sources", "5", "--workers", "8", "--rate", "200", "--duration", "3s", "--max-requests", "5000",
				"--account-limit", fmt.Sprint(testAccountLimit), "--lockout-threshold", fmt.Sprint(testAccountLimit),
				"--legit-email", "legit@example.org", "--legit-password", "legit-password-1", "--legit-interval", "500ms",
			}
			if tt.plant {
				args = append(args, "--found-password", planted)
			}
			stdout, stderr, err := runStuffing(t, args...)
			if err != nil {
				t.Fatalf("%v\nstderr:\n%s", err, stderr)
			}
			var rep httpReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("report is not JSON: %v\n%s", err, stdout)
			}

			if rep.Sent < 1 || rep.Sent > 5000 {
				t.Errorf("sent %d attempts, want 1..5000 (--max-requests)", rep.Sent)
			}
			if rep.ReachedMax > testAccountLimit || rep.AccountsOverLimit != 0 {
				t.Errorf("an account reached password checking %d times (%d accounts over), want at most %d",
					rep.ReachedMax, rep.AccountsOverLimit, testAccountLimit)
			}
			if rep.Reached > int64(testAccounts*testAccountLimit) {
				t.Errorf("%d attempts reached password checking, want at most %d", rep.Reached, testAccounts*testAccountLimit)
			}
			if rep.ServerErrors != 0 || rep.TransportErrs != 0 || rep.OtherStatus != 0 || rep.BadRequest != 0 {
				t.Errorf("server errors %d, transport errors %d (%s), other %d, 400 %d; want none",
					rep.ServerErrors, rep.TransportErrs, rep.FirstError, rep.OtherStatus, rep.BadRequest)
			}
			if sum := rep.Unauthorized + rep.Found + rep.Limited; sum != rep.Sent {
				t.Errorf("401+200+429 = %d, want every attempt sent (%d)", sum, rep.Sent)
			}
			if rep.Limited == 0 || rep.LimitedNoRetry != 0 {
				t.Errorf("%d 429s, %d without Retry-After; want some, all with Retry-After", rep.Limited, rep.LimitedNoRetry)
			}
			if rep.PasswordsFound != tt.wantFound {
				t.Errorf("passwords found %d, want %d", rep.PasswordsFound, tt.wantFound)
			}
			if rep.Lockouts != tt.wantLockouts {
				t.Errorf("lockouts %d, want %d", rep.Lockouts, tt.wantLockouts)
			}
			l := rep.Legit
			if l == nil || l.Attempts < 1 || l.Succeeded != l.Attempts || l.SuccessRate != 1 {
				t.Fatalf("legitimate user %+v, want every sign-in to succeed", l)
			}
			if l.P50Ms <= 0 || l.P99Ms < l.P50Ms {
				t.Errorf("legitimate user p50 %vms p99 %vms, want 0 < p50 <= p99", l.P50Ms, l.P99Ms)
			}
		})
	}
}

// TestHTTPQuietRun runs only the legitimate user: --max-requests 0.
func TestHTTPQuietRun(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	url := env.Start(t)
	env.AddUser(t, "legit@example.org", "legit-password-1", false)
	stdout, stderr, err := runStuffing(t, "http", "--target", url, "--max-requests", "0", "--duration", "1s",
		"--legit-email", "legit@example.org", "--legit-password", "legit-password-1", "--legit-interval", "200ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"attempts sent       0", "legitimate user     legit@example.org from 127.0.0.250", "(100.0%)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

func TestHTTPWrongLegitPassword(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	url := env.Start(t)
	_, stderr, err := runStuffing(t, "http", "--target", url, "--max-requests", "0", "--duration", "1s",
		"--legit-email", "nobody@example.org", "--legit-password", "wrong-password")
	if err == nil || !strings.Contains(stderr, "answered 401") {
		t.Fatalf("got %v, stderr %q; want a refusal to run naming the 401", err, stderr)
	}
}

func TestCredentialOrder(t *testing.T) {
	c := attackConfig{accounts: 3, passwords: 2, foundPassword: "right"}
	tests := []struct {
		k        int
		account  int
		password string
	}{
		{0, 0, "guess-000000"},
		{2, 2, "guess-000000"},
		{3, 0, "right"},
		{5, 2, "right"},
		{6, 0, "guess-000000"}, // the list starts again
	}
	for _, tt := range tests {
		a, p := c.credential(tt.k)
		if a != tt.account || p != tt.password {
			t.Errorf("credential(%d) = %d, %q; want %d, %q", tt.k, a, p, tt.account, tt.password)
		}
	}
}

func TestSourceAddr(t *testing.T) {
	tests := []struct {
		i    int
		want string
	}{
		{0, "127.0.1.1"},
		{253, "127.0.1.254"},
		{254, "127.0.2.1"},
		{maxSources - 1, "127.0.20.174"},
	}
	for _, tt := range tests {
		got := sourceAddr(tt.i)
		if got != netip.MustParseAddr(tt.want) || !got.IsLoopback() {
			t.Errorf("sourceAddr(%d) = %s, want %s on loopback", tt.i, got, tt.want)
		}
	}
}
