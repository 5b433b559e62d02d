package main

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAPIKey: add prints a key once, which a server accepts; list shows
// names and times but never a key; revoke ends it on the running server;
// a revoked key's name can be given to a new key, and another name to a
// key of the same application; unknown names and bad names are errors.
func TestAPIKey(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	srv := startServe(t, vars)

	stdout, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "shop")
	if err != nil {
		t.Fatalf("add: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^xck_[A-Za-z0-9_-]{43}$`).MatchString(lines[0]) ||
		!strings.Contains(lines[1], "will not be shown again") {
		t.Fatalf("add printed %q; want the key, then a line saying it will not be shown again", stdout)
	}
	key := lines[0]
	if _, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "shop"); err == nil || !strings.Contains(stderr, "in force already") {
		t.Fatalf("second add of shop: err %v, stderr %q; want an error saying it is in force", err, stderr)
	}

	ask := func() int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.base+"/api/v1/attempts",
			strings.NewReader(`{"kind":"login","account":"ann","client_ip":"192.0.2.1"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := ask(); got != http.StatusOK {
		t.Fatalf("the new key on the server: %d, want 200", got)
	}

	// The server notes the key's use off the request's path.
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	// Bounds here and below are for a server that never catches up: a
	// loaded machine may take seconds over each command.
	usedAt := time.Now()
	for {
		stdout, _, err = xcloak(t, vars, "", "apikey", "list")
		if err != nil || !strings.Contains(stdout, "shop") || strings.Contains(stdout, key) || strings.Contains(stdout, key[4:]) {
			t.Fatalf("list: %v %q; want shop listed, and never the key", err, stdout)
		}
		if len(stamp.FindAllString(stdout, -1)) == 2 {
			break // made and last used
		}
		if time.Since(usedAt) > 20*time.Second {
			t.Fatalf("list %v after the key's use:\n%s\nwant when it was last used", time.Since(usedAt), stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if stdout, stderr, err := xcloak(t, vars, "", "apikey", "revoke", "--name", "shop"); err != nil || stdout != "revoked the key of shop\n" {
		t.Fatalf("revoke: %v %q %q", err, stdout, stderr)
	}
	// Another process revoked it: the server's list of keys is at most a
	// second old.
	revokedAt := time.Now()
	for ask() != http.StatusUnauthorized {
		if time.Since(revokedAt) > 20*time.Second {
			t.Fatalf("the revoked key still passes %v after revocation", time.Since(revokedAt))
		}
		time.Sleep(100 * time.Millisecond)
	}

	for _, args := range [][]string{
		{"apikey", "revoke", "--name", "shop"},
		{"apikey", "revoke", "--name", "nobody"},
	} {
		if _, stderr, err := xcloak(t, vars, "", args...); err == nil || !strings.Contains(stderr, "is in force") {
			t.Errorf("%v: err %v, stderr %q; want an error saying no key of that name is in force", args, err, stderr)
		}
	}
	for _, name := range []string{"", "has space", strings.Repeat("a", 65), "ünï"} {
		if _, _, err := xcloak(t, vars, "", "apikey", "add", "--name", name); err == nil {
			t.Errorf("add --name %q: no error", name)
		}
	}
	if _, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "shop"); err != nil {
		t.Fatalf("add of a revoked key's name: %v %s", err, stderr)
	}
	stdout, _, _ = xcloak(t, vars, "", "apikey", "list")
	rows := strings.Split(strings.TrimSpace(stdout), "\n")
	// The revoked key shows when it was made and revoked (and maybe last
	// used); the new one only when it was made.
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "NAME") || len(stamp.FindAllString(rows[1], -1)) < 2 ||
		len(stamp.FindAllString(rows[2], -1)) != 1 {
		t.Errorf("list after a new key for shop:\n%s\nwant a header, the revoked key and the new one", stdout)
	}

	// A key that replaces another without a pause: a name of its own, the
	// application of the one it replaces.
	if stdout, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "shop-2", "--app", "shop"); err != nil ||
		!strings.Contains(stdout, "This key for shop will not be shown again") {
		t.Fatalf("add --name shop-2 --app shop: %v %q %q", err, stdout, stderr)
	}
	stdout, _, _ = xcloak(t, vars, "", "apikey", "list")
	if !regexp.MustCompile(`(?m)^shop-2 +shop +\d{4}-`).MatchString(stdout) {
		t.Errorf("list:\n%s\nwant shop-2 listed as a key of shop", stdout)
	}
	if _, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "blog", "--app", "no-such-app"); err == nil ||
		!strings.Contains(stderr, "no key has been made for that application") {
		t.Errorf("add --app of an application without keys: err %v, stderr %q", err, stderr)
	}
	// shop's own key retired, its name is not silently a second key of
	// the application shop-2 now speaks for.
	if _, stderr, err := xcloak(t, vars, "", "apikey", "revoke", "--name", "shop"); err != nil {
		t.Fatalf("revoke shop: %v %s", err, stderr)
	}
	if _, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "shop"); err == nil || !strings.Contains(stderr, "give --app shop") {
		t.Errorf("add --name shop while shop-2 speaks for shop: err %v, stderr %q; want a refusal naming --app", err, stderr)
	}
	if _, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "shop", "--app", "shop"); err != nil {
		t.Errorf("add --name shop --app shop: %v %s", err, stderr)
	}
}

// fullWriter fails every write, as stdout redirected to a full disk does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestAPIKeyAddNotWrittenIsRevoked: a key is shown once, so a key that
// could not be written (stdout on a full disk) reached no one. The
// command fails, rather than exit 0 with a key in force that nobody
// holds, and revokes it, so that the name can be given to a new key at
// once.
func TestAPIKeyAddNotWrittenIsRevoked(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	var stderr bytes.Buffer
	err := run(t.Context(), []string{"xcloak", "apikey", "add", "--name", "shop"}, environ(vars), strings.NewReader(""), fullWriter{}, &stderr)
	if err == nil || !strings.Contains(stderr.String(), "could not be written") {
		t.Fatalf("add with stdout full: err %v, stderr %q; want an error saying the key could not be written", err, stderr.String())
	}
	stdout, _, err := xcloak(t, vars, "", "apikey", "list")
	if err != nil || !regexp.MustCompile(`(?m)^shop +shop +\d{4}-\S+ +\d{4}-`).MatchString(stdout) {
		t.Fatalf("list: %v\n%s\nwant shop listed as revoked", err, stdout)
	}
	if _, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "shop"); err != nil {
		t.Fatalf("add of shop again: %v %s", err, stderr)
	}
}
