package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/internal/cli"
)

func TestCompareCommandLine(t *testing.T) {
	target := []string{"--target", "http://127.0.0.1:1"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no target", nil, "--target is required"},
		{"no baseline", []string{"--contenders", "rejections"}, "hello is the baseline"},
		{"unknown contender", []string{"--contenders", "hello,nginx"}, `unknown "nginx"`},
		{"twice", []string{"--contenders", "hello,hello"}, `"hello" twice`},
		{"forward-auth without a session", []string{"--contenders", "hello,forward-auth"}, "need a session"},
		{"decision without a key", []string{"--contenders", "hello,decision"}, "--api-key"},
		{"email without password", []string{"--contenders", "hello", "--email", "a@example.com"}, "together"},
		{"cookie and email", []string{"--contenders", "hello", "--cookie", "a=b", "--email", "a@example.com", "--password", "p"}, "not both"},
		{"fractional seconds", []string{"--contenders", "hello", "--duration", "2500ms"}, "whole seconds"},
		{"too long", []string{"--contenders", "hello", "--duration", "2m"}, "out of range"},
		{"fewer connections than threads", []string{"--contenders", "hello", "--threads", "4", "--connections", "2"}, "at least one per thread"},
		{"header injection", []string{"--contenders", "hello,forward-auth", "--cookie", "a=b\r\nX-Evil: 1"}, "single lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"compare"}, tt.args...)
			if tt.name != "no target" {
				args = append(args, target...)
			}
			_, stderr, err := runStuffing(t, args...)
			if got := cli.ExitCode(err); got != 2 {
				t.Errorf("exit code %d, want 2 (err %v)", got, err)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tt.wantErr)
			}
		})
	}
}

func TestCompareWithoutWrk(t *testing.T) {
	_, stderr, err := runStuffing(t, "compare", "--target", "http://127.0.0.1:1", "--contenders", "hello",
		"--wrk", filepath.Join(t.TempDir(), "wrk"))
	if cli.ExitCode(err) != 1 || !strings.Contains(stderr, "apt-get install -y wrk") {
		t.Errorf("err %v, stderr %q; want exit 1 saying how to install wrk", err, stderr)
	}
}

func TestCompareRefusesNonLoopbackTarget(t *testing.T) {
	_, stderr, err := runStuffing(t, "compare", "--target", "http://192.0.2.1:8080", "--contenders", "hello",
		"--wrk", fakeWrk(t))
	if err == nil || !strings.Contains(stderr, "not a loopback address") {
		t.Errorf("err %v, stderr %q; want a refusal", err, stderr)
	}
}

// fakeWrk writes a program that stands in for wrk: it appends its
// arguments and the STUFFING_ variables it was given to $FAKE_WRK_LOG,
// one line per run, and prints wrk's output with a rate that depends on
// the script: 50,000/s for the bare handler's, 20,000/s for the others.
func fakeWrk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	hello := filepath.Join(dir, "hello.txt")
	other := filepath.Join(dir, "other.txt")
	if err := os.WriteFile(hello, []byte(wrkHelloOutput), 0o600); err != nil {
		t.Fatal(err)
	}
	slower := strings.NewReplacer("53465.59", "20000.00", "63.76ms", "9.50ms").Replace(wrkDecisionOutput)
	if err := os.WriteFile(other, []byte(slower), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
echo "$* cookie=$STUFFING_COOKIE host=$STUFFING_HOST authz=$STUFFING_AUTHZ key=$STUFFING_API_KEY tag=$STUFFING_TAG base=$STUFFING_BASE email=$STUFFING_EMAIL" >> "$FAKE_WRK_LOG"
case "$*" in
*/status.lua*) cat %q ;;
*) sed 's/8019.97/20000.00/' %q ;;
esac
`, hello, other)
	path := filepath.Join(dir, "wrk")
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeXCloak answers the checks compare makes before its rounds: the
// victim's sign-ins 401 ten times then 429, the test user's with a
// session cookie, forward-auth 200 for that cookie, attempts 200 allow
// for the key.
func fakeXCloak(t *testing.T) (url string, attempts func() []string) {
	var mu sync.Mutex
	var bodies []string
	victimTries := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/login", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Email, Password string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case in.Email == "ann@example.com" && in.Password == "right":
			http.SetCookie(w, &http.Cookie{Name: "__Host-xcloak_session", Value: "s3ss10n", Path: "/"})
			http.SetCookie(w, &http.Cookie{Name: "__Host-xcloak_device_x", Value: "d3v1c3", Path: "/"})
			w.WriteHeader(http.StatusOK)
		case victimTries < 10:
			victimTries++
			w.WriteHeader(http.StatusUnauthorized)
		default:
			w.Header().Set("Retry-After", "600")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":"too_many_attempts"}`)
		}
	})
	mux.HandleFunc("GET /api/v1/authz/forward-auth", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != "__Host-xcloak_session=s3ss10n; __Host-xcloak_device_x=d3v1c3" ||
			r.Header.Get("X-Forwarded-Host") != "app.example.com" {
			w.WriteHeader(http.StatusFound)
			return
		}
		w.Header().Set("Remote-User", "ann@example.com")
	})
	mux.HandleFunc("POST /api/v1/attempts", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer xck_test" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		_, _ = io.WriteString(w, `{"decision":"allow","attempt_id":"a1"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

func TestCompareRunsEveryContenderEveryRound(t *testing.T) {
	log := filepath.Join(t.TempDir(), "runs.log")
	t.Setenv("FAKE_WRK_LOG", log)
	url, attempts := fakeXCloak(t)
	stdout, stderr, err := runStuffing(t, "compare", "--target", url, "--wrk", fakeWrk(t),
		"--rounds", "3", "--seed", "42", "--email", "ann@example.com", "--password", "right", "--api-key", "xck_test", "--json")
	if err != nil {
		t.Fatalf("compare: %v\nstderr: %s", err, stderr)
	}
	var rep compareReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	if rep.Seed != 42 || len(rep.Rounds) != 3 {
		t.Errorf("seed %d, %d rounds; want 42 and 3", rep.Seed, len(rep.Rounds))
	}
	want := []string{"hello", "hello-post", "hello-429", "rejections", "forward-auth", "decision"}
	if slices.Equal(rep.Rounds[0].Order, rep.Rounds[1].Order) && slices.Equal(rep.Rounds[1].Order, rep.Rounds[2].Order) {
		t.Errorf("every round ran in the order %v: not shuffled", rep.Rounds[0].Order)
	}
	for i, r := range rep.Rounds {
		if !slices.Equal(slices.Sorted(slices.Values(r.Order)), slices.Sorted(slices.Values(want))) {
			t.Errorf("round %d ran %v, want each of %v once", i+1, r.Order, want)
		}
	}
	for _, c := range rep.Contenders {
		wantRatio := 0.37406 // 20,000 / 53,465.59
		if c.Name == "hello" {
			wantRatio = 1
		}
		if c.Name == "decision" && (c.Expected != "200 allow" || c.Unexpected != 3*(10+60)) {
			t.Errorf("decision expected %q, %d others; want \"200 allow\" and the 210 challenges and 429s", c.Expected, c.Unexpected)
		}
		if len(c.RPS) != 3 || c.MedianRatio < wantRatio-0.001 || c.MedianRatio > wantRatio+0.001 {
			t.Errorf("%s: %v requests/s, median ratio %v; want 3 rounds at %.3f", c.Name, c.RPS, c.MedianRatio, wantRatio)
		}
	}

	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	runs := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(runs) != 18 {
		t.Fatalf("%d wrk runs, want 18:\n%s", len(runs), b)
	}
	// The login.lua runs' targets: rejections' XCloak, hello-post's bare
	// handler and hello-429's, three runs each.
	logins := map[string]int{}
	bases := map[string]bool{}
	for _, run := range runs {
		if !strings.Contains(run, "-t2 -c64 -d3s --latency -s ") {
			t.Errorf("wrk run %q lacks the flags", run)
		}
		switch {
		case strings.Contains(run, "/forward-auth.lua"):
			if !strings.Contains(run, "cookie=__Host-xcloak_session=s3ss10n; __Host-xcloak_device_x=d3v1c3 host=app.example.com authz=forward-auth") {
				t.Errorf("forward-auth run %q: want the session's cookies and the host", run)
			}
		case strings.Contains(run, "/decision.lua"):
			if !strings.Contains(run, "key=xck_test tag=compare-") {
				t.Errorf("decision run %q: want the key and a tag", run)
			}
			base := run[strings.Index(run, "base="):]
			if bases[base] {
				t.Errorf("two decision runs start at %s: their accounts and addresses repeat", base)
			}
			bases[base] = true
		case strings.Contains(run, "/login.lua"):
			if !strings.Contains(run, "email=compare-victim@example.com") {
				t.Errorf("rejections run %q: want the victim's address", run)
			}
			logins[strings.Fields(run)[6]]++
		}
		if strings.Contains(run, "s3ss10n") && strings.Contains(run[:strings.Index(run, " cookie=")], "s3ss10n") {
			t.Errorf("the session is on wrk's command line, where ps shows it: %q", run)
		}
	}
	if len(logins) != 3 || logins[url] != 3 {
		t.Errorf("login.lua runs by target %v, want 3 to %s and 3 to each of two bare handlers", logins, url)
	}
	for _, c := range rep.Contenders {
		if c.Name == "rejections" && (c.SameRequest != "hello-post" || c.MedianVsSameRequest != 1 ||
			c.SameAnswer != "hello-429" || c.MedianVsSameAnswer != 1) {
			t.Errorf("rejections vs %q: median %v, vs %q: median %v; want hello-post and hello-429, 1 each",
				c.SameRequest, c.MedianVsSameRequest, c.SameAnswer, c.MedianVsSameAnswer)
		}
		if c.Name == "hello-429" && c.Expected != "429" {
			t.Errorf("hello-429 expects %q, want 429", c.Expected)
		}
	}
	if !strings.Contains(stderr, "checking hello-429... 429 with Content-Length, Content-Type, Retry-After and XCloak's body") {
		t.Errorf("the check of hello-429 did not report XCloak's answer:\n%s", stderr)
	}
	if got := attempts(); len(got) != 1 || !strings.Contains(got[0], `"client_ip":"fd`) {
		t.Errorf("attempts before the rounds %q, want one check", got)
	}
}

func TestDecisionAttemptMatchesTheScript(t *testing.T) {
	// decision.lua formats attempt k the same way; 2^40-1 is its last.
	got := decisionAttempt("compare-ab", 1<<40-1)
	want := `{"kind":"login","account":"compare-ab-1099511627775@example.com","client_ip":"fdff:ffff:ffff::1"}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	lua, err := wrkScripts.ReadFile("wrk/decision.lua")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lua), `'{"kind":"login","account":"%s-%.0f@example.com","client_ip":"fd%02x:%04x:%04x::1"}'`) {
		t.Error("decision.lua's body differs from decisionAttempt's")
	}
}

// With --before, every contender but hello runs against each XCloak in
// the same rounds, the second's named before/NAME, each against its own
// target with its own session.
func TestCompareBeforeRunsInTheSameRounds(t *testing.T) {
	log := filepath.Join(t.TempDir(), "runs.log")
	t.Setenv("FAKE_WRK_LOG", log)
	after, _ := fakeXCloak(t)
	before, _ := fakeXCloak(t)
	stdout, stderr, err := runStuffing(t, "compare", "--target", after, "--before", before, "--wrk", fakeWrk(t),
		"--contenders", "hello,rejections,rejections-form,forward-auth",
		"--rounds", "2", "--seed", "7", "--email", "ann@example.com", "--password", "right", "--json")
	if err != nil {
		t.Fatalf("compare: %v\nstderr: %s", err, stderr)
	}
	var rep compareReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	want := []string{"before/forward-auth", "before/rejections", "before/rejections-form", "forward-auth", "hello", "rejections", "rejections-form"}
	for i, r := range rep.Rounds {
		if got := slices.Sorted(slices.Values(r.Order)); !slices.Equal(got, want) {
			t.Errorf("round %d ran %v, want each of %v once", i+1, got, want)
		}
	}
	for _, c := range rep.Contenders {
		if c.Name != "hello" && c.Expected == "" {
			t.Errorf("%s: no expected answer", c.Name)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]int{}
	for run := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		for _, u := range []string{after, before} {
			if strings.Contains(run, strings.TrimPrefix(u, "http://127.0.0.1")) {
				targets[u]++
			}
		}
		if strings.Contains(run, "/form.lua") && !strings.Contains(run, "email=compare-victim@example.com") {
			t.Errorf("rejections-form run %q: want the victim's address", run)
		}
	}
	if targets[after] != 6 || targets[before] != 6 {
		t.Errorf("wrk runs per target %v, want 6 against each (3 contenders, 2 rounds)", targets)
	}
}
