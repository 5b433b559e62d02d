package web_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

const attemptJSON = `{"kind":"login","account":"gina","client_ip":"192.0.2.40"}`

// TestAPIKeyRefused: a missing, malformed, unknown or revoked key is 401
// invalid_api_key with WWW-Authenticate: Bearer, whatever the body.
func TestAPIKeyRefused(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	key := env.AddAPIKey(t, "shop")
	revoked := env.AddAPIKey(t, "old")
	if err := env.Service.RevokeAPIKey(t.Context(), "old", "cli"); err != nil {
		t.Fatal(err)
	}
	c := xcloaktest.Client(t, "127.0.9.3")
	for name, header := range map[string][]string{
		"missing":       nil,
		"empty":         {"Authorization", ""},
		"basic":         {"Authorization", "Basic " + key},
		"no prefix":     {"Authorization", "Bearer " + strings.TrimPrefix(key, auth.APIKeyPrefix)},
		"short":         {"Authorization", "Bearer " + key[:len(key)-1]},
		"unknown":       {"Authorization", "Bearer " + auth.APIKeyPrefix + strings.Repeat("A", len(key)-len(auth.APIKeyPrefix))},
		"revoked":       {"Authorization", "Bearer " + revoked},
		"bad body, too": {"Authorization", "Bearer " + revoked, "X-Ignored", "x"},
	} {
		resp, body := post(t, c, base+"/api/v1/attempts", jsonType, attemptJSON, header...)
		if resp.StatusCode != 401 || strings.TrimSpace(body) != `{"error":"invalid_api_key"}` || resp.Header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s key: %d %s WWW-Authenticate %q; want 401 invalid_api_key, Bearer", name, resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// Two Authorization headers are no key, though the first is valid:
	// which one counts is not for a proxy on the way to decide.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/attempts", strings.NewReader(attemptJSON))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", jsonType)
	req.Header.Add("Authorization", "Bearer "+key)
	req.Header.Add("Authorization", "Bearer "+revoked)
	if resp, body := do(t, c, req); resp.StatusCode != 401 || strings.TrimSpace(body) != `{"error":"invalid_api_key"}` {
		t.Errorf("a valid key, then another Authorization: %d %s; want 401 invalid_api_key", resp.StatusCode, body)
	}
	if resp, body := post(t, c, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "bearer "+key); resp.StatusCode != 200 {
		t.Errorf("valid key: %d %s", resp.StatusCode, body)
	}
}

// TestAPIKeyRevokedWithinASecond: a revoked key is refused at once by the
// replica that revoked it, and by another once its list of keys is a
// second old.
func TestAPIKeyRevokedWithinASecond(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	first := env.Start(t)
	clk := &clock{t: time.Now()}
	second := env.Replica(t, xcloaktest.Options{Now: clk.Now}).Start(t)
	key := env.AddAPIKey(t, "shop")
	c := xcloaktest.Client(t, "127.0.9.4")
	ask := func(base string) int {
		resp, _ := post(t, c, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer "+key)
		return resp.StatusCode
	}
	if a, b := ask(first), ask(second); a != 200 || b != 200 {
		t.Fatalf("before revocation: %d and %d, want 200", a, b)
	}
	if err := env.Service.RevokeAPIKey(t.Context(), "shop", "cli"); err != nil {
		t.Fatal(err)
	}
	if got := ask(first); got != 401 {
		t.Fatalf("the revoking replica: %d, want 401 at once", got)
	}
	if got := ask(second); got != 200 {
		t.Fatalf("the other replica within its second: %d, want 200 from its list", got)
	}
	clk.Advance(time.Second)
	if got := ask(second); got != 401 {
		t.Fatalf("the other replica a second later: %d, want 401", got)
	}
}

// TestAPIKeyFailuresLimited: a network's failed key checks are limited
// (429 with Retry-After past the limit, before any lookup); a valid key
// still passes from it, and another network is not held.
func TestAPIKeyFailuresLimited(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleAPIKeyIP, 3) }})
	base := env.Start(t)
	key := env.AddAPIKey(t, "shop")
	sprayer := xcloaktest.Client(t, "127.0.9.5")
	bad := auth.APIKeyPrefix + strings.Repeat("B", len(key)-len(auth.APIKeyPrefix))
	var statuses []int
	var last *http.Response
	for range 5 {
		resp, _ := post(t, sprayer, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer "+bad)
		statuses = append(statuses, resp.StatusCode)
		last = resp
	}
	if want := []int{401, 401, 429, 429, 429}; !slices.Equal(statuses, want) || last.Header.Get("Retry-After") == "" {
		t.Fatalf("failed checks: %v (Retry-After %q), want %v with Retry-After", statuses, last.Header.Get("Retry-After"), want)
	}
	if resp, body := post(t, sprayer, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer "+key); resp.StatusCode != 200 {
		t.Fatalf("valid key from the locked network: %d %s, want 200", resp.StatusCode, body)
	}
	other := xcloaktest.Client(t, "127.0.9.6")
	if resp, _ := post(t, other, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer "+bad); resp.StatusCode != 401 {
		t.Fatalf("another network's bad key: %d, want 401", resp.StatusCode)
	}
}

// TestAPIKeyFailuresLimitedAtOnce: failed key checks sent all at once from
// one network are held by its limit as those sent one by one are: no more
// of them are answered 401 than its count, the rest 429.
func TestAPIKeyFailuresLimitedAtOnce(t *testing.T) {
	const limit, sent = 3, 60
	env := xcloaktest.New(t, xcloaktest.Options{Auth: func(c *auth.Config) { c.Limits.SetCount(auth.RuleAPIKeyIP, limit) }})
	base := env.Start(t)
	key := env.AddAPIKey(t, "shop")
	sprayer := newApp(t, base, auth.APIKeyPrefix+strings.Repeat("C", len(key)-len(auth.APIKeyPrefix)))
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		start  = make(chan struct{})
		byCode = map[int]int{}
	)
	for range sent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, _, _ := sprayer.raw(base+"/api/v1/attempts", attemptJSON)
			mu.Lock()
			defer mu.Unlock()
			byCode[status]++
		}()
	}
	close(start)
	wg.Wait()
	if byCode[401] > limit || byCode[401]+byCode[429] != sent {
		t.Fatalf("%d failed checks at once: %v, want at most %d answered 401 and the rest 429", sent, byCode, limit)
	}
}

// TestAPIKeysOutlastAPostgresBlip: a replica whose list of keys cannot be
// reloaded because Postgres is down keeps deciding by the list it has, for
// up to a minute, rather than refuse every application's sign-ins at once;
// no key can be revoked meanwhile, since revoking writes to Postgres. Past
// the minute it answers 503, and it takes up the keys again once Postgres
// is back.
func TestAPIKeysOutlastAPostgresBlip(t *testing.T) {
	pg := migratedPrivatePostgres(t)
	clk := &clock{t: time.Now()}
	env := xcloaktest.New(t, xcloaktest.Options{DatabaseURL: pg.URL(), Now: clk.Now})
	base := env.Start(t)
	key := env.AddAPIKey(t, "shop")
	c := xcloaktest.Client(t, "127.0.9.6")
	ask := func() (int, string) {
		resp, body := post(t, c, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer "+key)
		return resp.StatusCode, body
	}
	if status, body := ask(); status != 200 {
		t.Fatalf("before the outage: %d %s", status, body)
	}

	pg.Stop()
	clk.Advance(2 * time.Second)
	if status, body := ask(); status != 200 {
		t.Fatalf("Postgres down, the list 2s old: %d %s; want 200 from the list", status, body)
	}
	if resp, body := post(t, c, base+"/api/v1/attempts", jsonType, attemptJSON, "Authorization", "Bearer xck_"+strings.Repeat("A", 43)); resp.StatusCode != 401 {
		t.Fatalf("an unknown key with Postgres down: %d %s; want 401", resp.StatusCode, body)
	}
	clk.Advance(time.Minute)
	if status, body := ask(); status != 503 {
		t.Fatalf("Postgres down, the list a minute old: %d %s; want 503", status, body)
	}

	pg.Start()
	began := time.Now()
	for {
		status, body := ask()
		if status == 200 {
			break
		}
		if status != 503 || time.Since(began) > 20*time.Second {
			t.Fatalf("after Postgres came back: %d %s after %v", status, body, time.Since(began))
		}
		clk.Advance(time.Second)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAPIKeyRevokedDuringItsRequest: a request whose key was checked
// before the key was revoked, and whose body arrives after, is refused:
// a key's holder cannot open requests ahead and trickle their bodies in
// to go on deciding, and reporting, once the key is revoked, for as long
// as the server waits for a body.
func TestAPIKeyRevokedDuringItsRequest(t *testing.T) {
	for _, name := range []string{"decision", "outcome"} {
		t.Run(name, func(t *testing.T) {
			env := xcloaktest.New(t, xcloaktest.Options{})
			base := env.Start(t)
			key := env.AddAPIKey(t, "shop")
			path, body := "/api/v1/attempts", attemptJSON
			if name == "outcome" {
				// Asked of the service, so that the request below is the
				// key's first use, which it notes.
				keys, err := env.Service.ListAPIKeys(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				d, err := env.Service.Decide(t.Context(), keys[0], auth.AttemptRequest{Kind: auth.AttemptLogin, Account: "gina", ClientIP: "192.0.2.40"})
				if err != nil {
					t.Fatal(err)
				}
				path, body = "/api/v1/attempts/"+d.AttemptID+"/outcome", `{"result":"failure"}`
			}
			pr, pw := io.Pipe()
			req, err := http.NewRequestWithContext(t.Context(), "POST", base+path, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len(body))
			req.Header.Set("Content-Type", jsonType)
			req.Header.Set("Authorization", "Bearer "+key)
			type result struct {
				resp *http.Response
				err  error
			}
			done := make(chan result, 1)
			c := xcloaktest.Client(t, "127.0.9.14")
			go func() {
				resp, err := c.Do(req)
				done <- result{resp, err}
			}()
			if _, err := pw.Write([]byte(body[:1])); err != nil {
				t.Fatal(err)
			}
			// A key's use is noted once its check has passed.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				var used bool
				if err := env.DB.QueryRow(t.Context(), `SELECT last_used_at IS NOT NULL FROM api_keys`).Scan(&used); err != nil {
					t.Fatal(err)
				}
				if used {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the key was never checked")
				}
			}
			if err := env.Service.RevokeAPIKey(t.Context(), "shop", "cli"); err != nil {
				t.Fatal(err)
			}
			if _, err := pw.Write([]byte(body[1:])); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			answer, _ := io.ReadAll(r.resp.Body)
			r.resp.Body.Close()
			if r.resp.StatusCode != 401 || strings.TrimSpace(string(answer)) != `{"error":"invalid_api_key"}` {
				t.Fatalf("the body sent after the key was revoked: %d %s, want 401 invalid_api_key", r.resp.StatusCode, answer)
			}
		})
	}
}
