package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// With --legit-users, each browser signs in from its own address with its
// own cookies, and every sign-in of every browser is a sample.
func TestHTTPLegitUsers(t *testing.T) {
	var mu sync.Mutex
	byAddr := map[string]int{}
	withCookie := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		byAddr[host]++
		if c, err := r.Cookie("device"); err == nil && c.Value == host {
			withCookie[host]++
		}
		mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "device", Value: host, Path: "/"})
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(srv.Close)
	// A run of 2 s: the third browser's first measured sign-in comes
	// 200 ms in, which a loaded machine's pause could push past a run of
	// 1 s.
	stdout, stderr, err := runStuffing(t, "http", "--target", srv.URL, "--max-requests", "0", "--duration", "2s",
		"--legit-email", "legit@example.org", "--legit-password", "legit-password-1",
		"--legit-interval", "300ms", "--legit-users", "3", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep httpReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	l := rep.Legit
	if l == nil || l.Users != 3 || l.Source != "127.0.0.248-127.0.0.250" {
		t.Fatalf("legit %+v, want 3 users from 127.0.0.248-127.0.0.250", l)
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, a := range []string{"127.0.0.248", "127.0.0.249", "127.0.0.250"} {
		// The first sign-in, before the attack, is not measured; every
		// later one comes back with the cookie that browser was given.
		if byAddr[a] < 2 || withCookie[a] != byAddr[a]-1 {
			t.Errorf("%s: %d sign-ins, %d with its own cookie; want at least 2, all but the first with it", a, byAddr[a], withCookie[a])
		}
		total += byAddr[a] - 1
	}
	if len(byAddr) != 3 || l.Attempts != total || l.Succeeded != total || len(l.SamplesMs) != total {
		t.Errorf("server saw %v; report %d attempts, %d succeeded, %d samples; want %d from three addresses", byAddr, l.Attempts, l.Succeeded, len(l.SamplesMs), total)
	}
}

func TestHTTPLegitUsersBounds(t *testing.T) {
	for _, args := range [][]string{
		{"--legit-users", "0"},
		{"--legit-users", "65"},
		{"--legit-source", "127.0.0.3", "--legit-users", "4"},
		{"--legit-source", "127.0.1.3", "--legit-users", "2"},
		{"--legit-source", "127.0.1.202", "--legit-users", "5"}, // down to 127.0.1.198, among 127.0.1.1-127.0.1.200
	} {
		args = append([]string{"http", "--target", "http://127.0.0.1:1", "--legit-email", "a@example.org", "--legit-password", "pw"}, args...)
		_, stderr, err := runStuffing(t, args...)
		if err == nil || !strings.Contains(stderr, "legit") {
			t.Errorf("%v: err %v, stderr %q; want a refusal", args, err, stderr)
		}
	}
}
