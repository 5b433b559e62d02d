package web_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"testing"
	"time"

	"sync"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// answerTally counts the answers an XCloak gave to sign-in requests, by
// status, as the server wrote them.
type answerTally struct {
	mu sync.Mutex
	by map[int]int
}

// countSignIns makes env count every answer to a sign-in; call it before
// env.Start.
func countSignIns(env *xcloaktest.Env) *answerTally {
	a := &answerTally{by: map[int]int{}}
	next := env.Handler
	env.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || (r.URL.Path != "/login" && r.URL.Path != "/api/v1/login") {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&tallyWriter{ResponseWriter: w, tally: a}, r)
	})
	return a
}

// snapshot returns the answers counted so far.
func (a *answerTally) snapshot() map[int]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.by)
}

// tallyWriter counts the status when it is written, so before the client
// can have read the answer.
type tallyWriter struct {
	http.ResponseWriter
	tally   *answerTally
	written bool
}

func (w *tallyWriter) WriteHeader(status int) {
	if !w.written {
		w.written = true
		w.tally.mu.Lock()
		w.tally.by[status]++
		w.tally.mu.Unlock()
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *tallyWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *tallyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// minus returns the answers of a that b does not hold.
func minus(a, b map[int]int) map[int]int {
	out := maps.Clone(a)
	for code, n := range b {
		out[code] -= n
	}
	return out
}

// checkNothingLost writes the queued events (retrying while a store is
// still coming back), then checks that the dashboard's figures equal the
// answers counted (every sign-in an attempt; 200 a success, 401 a failure,
// 429 a rejection, 503 not decided, 400 malformed) and that the stored
// events, coalesced and folded rows by their count, equal stored.
func checkNothingLost(t *testing.T, env *xcloaktest.Env, admin *http.Client, base string, counted, stored map[int]int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := env.Service.Flush(context.Background())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writing the queued events 20 s after the outage: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for code := range stored {
		switch code {
		case 200, 400, 401, 429, 503:
		default:
			if stored[code] != 0 {
				t.Errorf("%d sign-ins answered %d", stored[code], code)
			}
		}
	}

	resp, body := get(t, admin, base+"/api/v1/admin/stats?period=1h")
	var s struct {
		Attempts, Successes, Failures, Rejected, Unavailable, Invalid int64
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("stats: %d %s", resp.StatusCode, body)
	}
	total := 0
	for _, n := range counted {
		total += n
	}
	got := [6]int64{s.Attempts, s.Successes, s.Failures, s.Rejected, s.Unavailable, s.Invalid}
	want := [6]int64{int64(total), int64(counted[200]), int64(counted[401]), int64(counted[429]), int64(counted[503]), int64(counted[400])}
	if got != want {
		t.Errorf("dashboard [attempts successes failures rejected unavailable invalid] = %v; the answers given were %v", got, want)
	}

	rows, err := env.DB.Query(t.Context(), `SELECT kind, sum(coalesce((detail->>'count')::int, 1)) FROM security_events
		WHERE kind IN ('login_succeeded', 'login_failed', 'login_rejected', 'login_unavailable', 'login_invalid') GROUP BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for rows.Next() {
		var kind string
		var n int
		if err := rows.Scan(&kind, &n); err != nil {
			t.Fatal(err)
		}
		kinds[kind] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantKinds := map[string]int{
		"login_succeeded": stored[200], "login_failed": stored[401], "login_rejected": stored[429],
		"login_unavailable": stored[503], "login_invalid": stored[400],
	}
	for kind, n := range wantKinds {
		if kinds[kind] != n {
			t.Errorf("stored events: %v; the answers given were %v", kinds, wantKinds)
			break
		}
	}
	t.Logf("answers %v, all counted on the dashboard and stored", stored)
}
