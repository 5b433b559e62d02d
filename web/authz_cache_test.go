package web_test

import (
	"context"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// clock is a test's settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestForwardAuthRevocationAcrossReplicas: a session ended on replica B
// stops passing forward-auth on replica A, which remembered it, once A's
// cache bound (a second) has passed, and not before the bound is needed;
// one ended on A stops passing on A at once.
func TestForwardAuthRevocationAcrossReplicas(t *testing.T) {
	web := func(c *webConfig) {
		c.TrustedProxies = mustPrefixes(t, proxyAddr)
		c.ProtectedHosts = mustHosts(t, "app.example.test")
	}
	ck := &clock{t: time.Now()}
	a := xcloaktest.New(t, xcloaktest.Options{Web: web, Now: ck.Now})
	baseA := a.Start(t)
	b := xcloaktest.New(t, xcloaktest.Options{Web: web, DatabaseURL: a.DatabaseURL, Redis: a.Redis, Prefix: a.Prefix})
	baseB := b.Start(t)
	a.AddUser(t, "ann@example.com", "correct horse", false)
	app := forwarded("https", "app.example.test", "/")
	ctx := context.Background()
	client := auth.Client{Addr: netip.MustParseAddr("127.0.0.9")}

	// passesOnA reports whether forward-auth on A lets token through.
	passesOnA := func(token string) bool {
		t.Helper()
		resp := forwardAuth(t, baseA, proxyAddr, token, app...)
		switch resp.StatusCode {
		case http.StatusOK:
			return true
		case http.StatusFound:
			return false
		}
		t.Fatalf("forward-auth on A: %d", resp.StatusCode)
		return false
	}

	for _, c := range []struct {
		name   string
		revoke func(t *testing.T, token string)
	}{
		{"sign-out", func(t *testing.T, token string) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, baseB+"/logout", nil)
			req.Header.Set("Cookie", "xcloak_session="+token)
			if resp, _ := do(t, xcloaktest.Client(t, "127.0.0.9"), req); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign-out on B: %d", resp.StatusCode)
			}
		}},
		{"session ended from the account page", func(t *testing.T, token string) {
			sess, err := b.Service.Session(ctx, token)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Service.EndSession(ctx, sess, token, sess.PublicID, client); err != nil {
				t.Fatal(err)
			}
		}},
		{"sign out everywhere", func(t *testing.T, _ string) {
			if err := b.Service.SignOutEverywhere(ctx, "ann@example.com", "admin:root@example.com"); err != nil {
				t.Fatal(err)
			}
		}},
		{"sign out everywhere else", func(t *testing.T, _ string) {
			other := sessionToken(t, baseB, "ann@example.com", "correct horse")
			sess, err := b.Service.Session(ctx, other)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Service.EndOtherSessions(ctx, sess, other, client); err != nil {
				t.Fatal(err)
			}
		}},
		{"password set", func(t *testing.T, _ string) {
			if err := b.Service.SetPassword(ctx, "ann@example.com", "correct horse", "cli"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			token := sessionToken(t, baseB, "ann@example.com", "correct horse")
			if !passesOnA(token) {
				t.Fatal("a live session does not pass on A")
			}
			c.revoke(t, token)
			// Within the bound A may still answer from what it
			// remembered; that it does shows the cache is what is tested.
			if !passesOnA(token) {
				t.Fatal("A did not remember the session: the bound is not what is tested")
			}
			ck.Advance(time.Second)
			if passesOnA(token) {
				t.Errorf("a session ended on B still passes on A %s later", time.Second)
			}
		})
	}

	t.Run("sign-out on A itself", func(t *testing.T) {
		token := sessionToken(t, baseA, "ann@example.com", "correct horse")
		if !passesOnA(token) {
			t.Fatal("a live session does not pass on A")
		}
		if err := a.Service.Logout(ctx, token); err != nil {
			t.Fatal(err)
		}
		if passesOnA(token) {
			t.Error("a session ended on A still passes on A")
		}
	})
}
