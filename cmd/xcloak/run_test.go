package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/internal/testenv"
)

func TestMain(m *testing.M) {
	// The test binary started again with this variable set is xcloak
	// itself, for the tests of what main does beyond run.
	if os.Getenv(runMainEnv) != "" {
		main()
	}
	testenv.Main(m)
}

// testSecret is the XCLOAK_SECRET of the tests' servers.
const testSecret = "test-secret-never-printed-0123456789abcdef"

// env is a getenv that knows only the given variables.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// environ is an environment of only the given variables, as os.Environ
// lists it, for run.
func environ(vars map[string]string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, name+"="+vars[name])
	}
	return out
}

// storeSettings returns settings that give the test its own Postgres
// database and Redis key prefix, both removed when it ends, and a secret.
// Metrics are off, so that servers running at once do not all ask for the
// default metrics port; tests of the metrics choose their own.
func storeSettings(t *testing.T) map[string]string {
	t.Helper()
	_, prefix := testenv.Redis(t)
	return map[string]string{
		"XCLOAK_REDIS_URL":    testenv.RedisURL(),
		"XCLOAK_KEY_PREFIX":   prefix,
		"XCLOAK_DATABASE_URL": testenv.Postgres(t),
		"XCLOAK_SECRET":       testSecret,
		"XCLOAK_METRICS_ADDR": "off",
		"XCLOAK_MAIL_LOG":     "true",
	}
}

// lockedBuffer is a bytes.Buffer that the server's goroutines may write to
// while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is "xcloak serve" running in the test.
type server struct {
	base   string        // http://127.0.0.1:port
	lines  chan string   // stdout, a line at a time
	stdout lockedBuffer  // all of stdout
	stderr lockedBuffer  // all of stderr
	cancel func()        // asks serve to shut down
	done   chan struct{} // closed when run has returned
	err    error         // what run returned, once done is closed
}

// startServe runs "xcloak serve" on a free port of 127.0.0.1 with the
// given settings and flags, and returns once it prints its address. The
// server is stopped when the test ends.
func startServe(t *testing.T, vars map[string]string, flags ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &server{lines: make(chan string, 64), cancel: cancel, done: make(chan struct{})}
	stdoutR, stdoutW := io.Pipe()
	args := append([]string{"xcloak", "serve", "--addr", "127.0.0.1:0"}, flags...)
	go func() {
		s.err = run(ctx, args, environ(vars), strings.NewReader(""), stdoutW, &s.stderr)
		stdoutW.Close()
		close(s.done)
	}()
	go func() {
		defer close(s.lines)
		lines := bufio.NewScanner(stdoutR)
		for lines.Scan() {
			s.stdout.Write(append(lines.Bytes(), '\n'))
			select {
			case s.lines <- lines.Text():
			default: // nobody reads this far; the buffer has it
			}
		}
		_, _ = io.Copy(io.Discard, stdoutR)
	}()
	t.Cleanup(func() { _ = s.stop() })

	first := s.nextLine(t)
	after, ok := strings.CutPrefix(first, "XCloak listening on ")
	if !ok {
		t.Fatalf("first line of stdout = %q, want XCloak listening on ...", first)
	}
	s.base = after
	return s
}

// nextLine returns the next line serve prints, failing the test if serve
// ends first.
func (s *server) nextLine(t *testing.T) string {
	t.Helper()
	line, ok := <-s.lines
	if !ok {
		t.Fatalf("serve ended early: %v\nstderr:\n%s", s.stop(), s.stderr.String())
	}
	return line
}

// stop cancels serve's context and returns what run returned.
func (s *server) stop() error {
	s.cancel()
	<-s.done
	return s.err
}

// xcloak runs one command to its end with stdin as input.
func xcloak(t *testing.T, vars map[string]string, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(t.Context(), append([]string{"xcloak"}, args...), environ(vars), strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// addUser runs "xcloak user add" and fails the test if it fails.
func addUser(t *testing.T, vars map[string]string, email, passwordLine string) {
	t.Helper()
	stdout, stderr, err := xcloak(t, vars, passwordLine, "user", "add", "--email", email)
	if err != nil {
		t.Fatalf("user add %s: %v\nstderr:\n%s", email, err, stderr)
	}
	if want := "created user " + email + "\n"; stdout != want {
		t.Fatalf("user add printed %q, want %q", stdout, want)
	}
}

// signIn posts a sign-in to the JSON API and returns the response, its
// body read.
func signIn(t *testing.T, base, email, password string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"email": email, "password": password})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/login", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("sign in as %s: %v", email, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// cookie returns the response's cookie of that name, or nil.
func cookie(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestServe(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	dbURL, dbPassword := withPassword(t, vars["XCLOAK_DATABASE_URL"])
	vars["XCLOAK_DATABASE_URL"] = dbURL
	const email, password = "ann@example.com", "correct horse battery"
	addUser(t, vars, email, password+"\n")

	srv := startServe(t, vars)

	t.Run("pages", func(t *testing.T) {
		tests := []struct {
			method   string
			path     string
			wantCode int
			wantBody string
		}{
			{http.MethodGet, "/healthz", http.StatusOK, "ok"},
			{http.MethodGet, "/readyz", http.StatusOK, `"postgres":"ok"`},
			{http.MethodGet, "/readyz", http.StatusOK, `"redis":"ok"`},
			{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, ""},
			{http.MethodGet, "/no-such-page", http.StatusNotFound, ""},
		}
		for _, tt := range tests {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.base+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.method, tt.path, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("read body: %v", err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Errorf("%s %s: status = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.wantCode)
			}
			if !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("%s %s: body = %q, want it to contain %q", tt.method, tt.path, body, tt.wantBody)
			}
		}
	})

	t.Run("sign in", func(t *testing.T) {
		resp := signIn(t, srv.base, email, password)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status = %d, want %d", resp.StatusCode, http.StatusOK)
		}
		// Without --dev and XCLOAK_INSECURE_COOKIES, cookies are Secure
		// and carry the __Host- prefix.
		c := cookie(resp, "__Host-xcloak_session")
		if c == nil || c.Value == "" || !c.Secure || !c.HttpOnly {
			t.Errorf("session cookie = %+v, want a Secure, HttpOnly __Host-xcloak_session; all cookies: %v", c, resp.Cookies())
		}
		if resp := signIn(t, srv.base, email, "wrong password"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("wrong password: status = %d, want %d", resp.StatusCode, http.StatusUnauthorized)
		}
	})

	if err := srv.stop(); err != nil {
		t.Errorf("run returned %v after cancel, want nil\nstderr:\n%s", err, srv.stderr.String())
	}
	for name, out := range map[string]string{"stdout": srv.stdout.String(), "stderr": srv.stderr.String()} {
		for what, secret := range map[string]string{"database password": dbPassword, "secret": testSecret, "user's password": password} {
			if strings.Contains(out, secret) {
				t.Errorf("%s shows the %s:\n%s", name, what, out)
			}
		}
	}
}

// TestServeMailLog: with XCLOAK_MAIL_LOG=true and no SMTP server, serve
// starts, says at every start that reset links go to the log, and does
// write them there.
func TestServeMailLog(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	// The secret comes from a file here, as container secrets do.
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(vars["XCLOAK_SECRET"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	delete(vars, "XCLOAK_SECRET")
	vars["XCLOAK_SECRET_FILE"] = secretFile
	addUser(t, vars, "ann@example.com", "correct horse battery\n")
	const warning = "XCLOAK_SMTP_URL is not set and XCLOAK_MAIL_LOG is true: reset mails, links included, are written to this log"
	for _, start := range []string{"first", "second"} {
		srv := startServe(t, vars)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.base+"/api/v1/password-reset", strings.NewReader(`{"email":"ann@example.com"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
			t.Fatalf("%s start: reset request: %d", start, resp.StatusCode)
		}
		if err := srv.stop(); err != nil {
			t.Fatalf("%s start: %v", start, err)
		}
		logs := srv.stderr.String()
		if !strings.Contains(logs, warning) {
			t.Errorf("%s start: no warning %q in\n%s", start, warning, logs)
		}
		if !strings.Contains(logs, "/password-reset/") {
			t.Errorf("%s start: no reset link in the log:\n%s", start, logs)
		}
	}
}

func TestServeDev(t *testing.T) {
	// --dev keeps its secret under the working directory.
	dir := t.TempDir()
	t.Chdir(dir)
	vars := storeSettings(t)
	delete(vars, "XCLOAK_SECRET")
	delete(vars, "XCLOAK_MAIL_LOG") // --dev writes mails to the log unasked

	demoPassword := func(srv *server) string {
		t.Helper()
		line := srv.nextLine(t)
		rest, ok := strings.CutPrefix(line, "Demo admin: admin@xcloak.test / ")
		password, note, ok2 := strings.Cut(rest, "   ")
		if !ok || !ok2 || password == "" || note != "(development mode: new password at every start)" {
			t.Fatalf("second line = %q, want the demo admin and password", line)
		}
		return password
	}

	srv := startServe(t, vars, "--dev")
	first := demoPassword(srv)
	resp := signIn(t, srv.base, demoAdminEmail, first)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("demo admin sign-in: status = %d, want %d\nstderr:\n%s", resp.StatusCode, http.StatusOK, srv.stderr.String())
	}
	// Plain http needs cookies without Secure and so without __Host-.
	if c := cookie(resp, "xcloak_session"); c == nil || c.Secure {
		t.Errorf("session cookie = %+v, want xcloak_session without Secure; all cookies: %v", c, resp.Cookies())
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("run returned %v after cancel, want nil", err)
	}
	secret := readDevSecret(t)

	// The second start finds the demo admin and the secret in place: the
	// admin gets a new password, the secret stays.
	srv = startServe(t, vars, "--dev")
	second := demoPassword(srv)
	if second == first {
		t.Errorf("second start printed the same password %q", second)
	}
	if resp := signIn(t, srv.base, demoAdminEmail, second); resp.StatusCode != http.StatusOK {
		t.Errorf("sign-in with the new password: status = %d, want %d", resp.StatusCode, http.StatusOK)
	}
	if resp := signIn(t, srv.base, demoAdminEmail, first); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("sign-in with the old password: status = %d, want %d", resp.StatusCode, http.StatusUnauthorized)
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("run returned %v after cancel, want nil", err)
	}
	if got := readDevSecret(t); got != secret {
		t.Errorf("dev secret changed across restarts: %q, then %q", secret, got)
	}

	// Started without --dev on the same database, serve says the demo
	// admin, whose password went to a log, is still there, demoted and
	// disabled too, until it is deleted.
	vars["XCLOAK_SECRET"], vars["XCLOAK_MAIL_LOG"] = testSecret, "true"
	const warning = "the demo admin of --dev, admin@xcloak.test, is an account of this database"
	// Another administrator, so that the demo admin may be disabled.
	addUser(t, vars, "root@example.com", "correct horse battery staple\n")
	if _, stderr, err := xcloak(t, vars, "", "user", "promote", "--email", "root@example.com"); err != nil {
		t.Fatalf("user promote: %v\n%s", err, stderr)
	}
	for _, change := range [][]string{nil, {"disable"}, {"delete", "--yes"}} {
		if change != nil {
			if _, stderr, err := xcloak(t, vars, "", append([]string{"user", change[0], "--email", demoAdminEmail}, change[1:]...)...); err != nil {
				t.Fatalf("user %s: %v\n%s", change[0], err, stderr)
			}
		}
		srv = startServe(t, vars)
		if err := srv.stop(); err != nil {
			t.Fatalf("run returned %v after cancel, want nil", err)
		}
		deleted := change != nil && change[0] == "delete"
		if logs := srv.stderr.String(); strings.Contains(logs, warning) == deleted {
			t.Errorf("after %v, error %q at a start without --dev: %t, want %t\n%s", change, warning, !deleted, !deleted, logs)
		}
	}
}

// TestServeDevOnThisMachineOnly: --dev drops Secure from cookies, makes
// administrators' second factor optional and prints a demo admin's
// password; it refuses to listen beyond loopback or to answer for a
// public name, before anything is made.
func TestServeDevOnThisMachineOnly(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"every interface", map[string]string{"XCLOAK_ADDR": "0.0.0.0:0"}, `--dev serves this machine only: XCLOAK_ADDR "0.0.0.0:0"`},
		{"no host", map[string]string{"XCLOAK_ADDR": ":0"}, `--dev serves this machine only: XCLOAK_ADDR ":0"`},
		{"an address of the network", map[string]string{"XCLOAK_ADDR": "192.0.2.10:0"}, `XCLOAK_ADDR "192.0.2.10:0"`},
		{"a public name", map[string]string{"XCLOAK_ADDR": "127.0.0.1:0", "XCLOAK_PUBLIC_URL": "https://login.example.com"},
			`--dev serves this machine only: XCLOAK_PUBLIC_URL "https://login.example.com"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"XCLOAK_REDIS_URL": "redis://127.0.0.1:1", "XCLOAK_DATABASE_URL": "postgres://u@127.0.0.1:1/none"}
			maps.Copy(vars, tc.vars)
			stdout, stderr, err := xcloak(t, vars, "", "serve", "--dev")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve --dev: %v; want %q", err, tc.want)
			}
			if strings.Contains(stdout+stderr, "Demo admin") {
				t.Errorf("a demo admin was made: %s", stdout)
			}
		})
	}
	for _, ok := range []string{"http://localhost:8080", "http://login.xcloak.localhost:8080", "http://login.xcloak.test", "http://[::1]:8080"} {
		if err := devOnThisMachine("127.0.0.1:8080", mustURL(t, ok)); err != nil {
			t.Errorf("XCLOAK_PUBLIC_URL %s: %v, want it taken", ok, err)
		}
	}
	for _, ok := range []string{"127.0.0.1:0", "[::1]:8080", "localhost:8080"} {
		if err := devOnThisMachine(ok, nil); err != nil {
			t.Errorf("XCLOAK_ADDR %s: %v, want it taken", ok, err)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// readDevSecret returns the development secret in the working directory,
// checking its form and that only its owner can read it.
func readDevSecret(t *testing.T) string {
	t.Helper()
	fi, err := os.Stat(devSecretPath)
	if err != nil {
		t.Fatalf("dev secret: %v", err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("dev secret mode = %v, want 0600", mode)
	}
	b, err := os.ReadFile(devSecretPath)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(b))
	if _, err := hex.DecodeString(secret); err != nil || len(secret) != 64 {
		t.Errorf("dev secret = %q, want 32 bytes in hex", secret)
	}
	return secret
}

func TestServeRefusesBadSettings(t *testing.T) {
	t.Parallel()
	emptyCorpus := t.TempDir()
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{
			name:    "limit that does not parse",
			env:     map[string]string{"XCLOAK_LIMIT_LOGIN_IP": "banana"},
			wantErr: `XCLOAK_LIMIT_LOGIN_IP: ratelimit: limit "banana": want COUNT/WINDOW, e.g. 50/10m`,
		},
		{
			name:    "limit out of range, from a flag",
			args:    []string{"--limit-reset-ip", "0/1m"},
			wantErr: "--limit-reset-ip (XCLOAK_LIMIT_RESET_IP): ratelimit: limit",
		},
		{
			name:    "short secret",
			env:     map[string]string{"XCLOAK_SECRET": "short"},
			wantErr: "XCLOAK_SECRET: 5 bytes long, want at least 32",
		},
		{
			name:    "secret of one repeated character",
			env:     map[string]string{"XCLOAK_SECRET": strings.Repeat("x", 40)},
			wantErr: "XCLOAK_SECRET: has only 1 different bytes, want at least 10",
		},
		{
			name:    "secret that is a pattern",
			args:    []string{"--secret", "0123456789abcdef0123456789abcdef"},
			wantErr: "--secret (XCLOAK_SECRET): is a repeating pattern",
		},
		{
			name:    "secret and its file",
			env:     map[string]string{"XCLOAK_SECRET_FILE": "/run/secrets/xcloak"},
			wantErr: "XCLOAK_SECRET and XCLOAK_SECRET_FILE are both set",
		},
		{
			name:    "database URL from a file that is not there",
			env:     map[string]string{"XCLOAK_DATABASE_URL": "", "XCLOAK_DATABASE_URL_FILE": "/nonexistent/xcloak-db-url"},
			wantErr: "XCLOAK_DATABASE_URL_FILE: cannot read",
		},
		{
			name:    "no secret without --dev",
			env:     map[string]string{"XCLOAK_SECRET": ""},
			wantErr: "XCLOAK_SECRET is not set",
		},
		{
			name:    "an empty secret as a flag",
			env:     map[string]string{"XCLOAK_SECRET": ""},
			args:    []string{"--secret="},
			wantErr: "XCLOAK_SECRET is not set, or empty (as is --secret)",
		},
		{
			name:    "no SMTP server, and mails in the log not asked for",
			env:     map[string]string{"XCLOAK_MAIL_LOG": "false"},
			wantErr: "XCLOAK_SMTP_URL is not set: set it, or XCLOAK_MAIL_LOG=true",
		},
		{
			name:    "mails in the log, at a level that hides them",
			env:     map[string]string{"XCLOAK_MAIL_LOG": "true", "XCLOAK_LOG_LEVEL": "error"},
			wantErr: "XCLOAK_SMTP_URL is not set, so mails are written to the log at warn, which XCLOAK_LOG_LEVEL=error hides",
		},
		{
			name:    "mail log that is no bool",
			env:     map[string]string{"XCLOAK_MAIL_LOG": "yes please"},
			wantErr: `XCLOAK_MAIL_LOG: "yes please" is not true or false`,
		},
		{
			name:    "log level that is not one of the four",
			env:     map[string]string{"XCLOAK_LOG_LEVEL": "verbose"},
			wantErr: `XCLOAK_LOG_LEVEL: "verbose" is not debug, info, warn or error`,
		},
		{
			name:    "trusted proxy with host bits",
			env:     map[string]string{"XCLOAK_TRUSTED_PROXIES": "10.0.0.5/8"},
			wantErr: `XCLOAK_TRUSTED_PROXIES: trusted proxy "10.0.0.5/8": host bits set: write 10.0.0.5 for the proxy alone, or 10.0.0.0/8 for its network`,
		},
		{
			name:    "trusted proxy that is no address",
			env:     map[string]string{"XCLOAK_TRUSTED_PROXIES": "10.0.0.0/8, 300.1.1.1/8"},
			wantErr: `XCLOAK_TRUSTED_PROXIES: trusted proxy "300.1.1.1/8"`,
		},
		{
			name:    "forwarding header that is not one of the three",
			env:     map[string]string{"XCLOAK_FORWARDED_HEADER": "x-real-ip"},
			wantErr: `XCLOAK_FORWARDED_HEADER: "x-real-ip" is not x-forwarded-for, forwarded or none`,
		},
		{
			name:    "public URL that is not http",
			env:     map[string]string{"XCLOAK_PUBLIC_URL": "ftp://x"},
			wantErr: "XCLOAK_PUBLIC_URL:",
		},
		{
			name:    "public URL that is relative",
			env:     map[string]string{"XCLOAK_PUBLIC_URL": "/login"},
			wantErr: "XCLOAK_PUBLIC_URL:",
		},
		{
			name:    "public URL with a password",
			env:     map[string]string{"XCLOAK_PUBLIC_URL": "https://u:hunter2@example.com"},
			wantErr: "XCLOAK_PUBLIC_URL: must not hold a user or password",
		},
		{
			name:    "SMTP URL without a sender",
			env:     map[string]string{"XCLOAK_SMTP_URL": "smtp://u:hunter2@mail.example.com:587"},
			wantErr: "XCLOAK_SMTP_URL: smtpmail: invalid SMTP URL: from parameter is required",
		},
		{
			name:    "bool that is neither",
			env:     map[string]string{"XCLOAK_INSECURE_COOKIES": "maybe"},
			wantErr: `XCLOAK_INSECURE_COOKIES: "maybe" is not true or false`,
		},
		{
			name:    "key prefix with a brace",
			env:     map[string]string{"XCLOAK_KEY_PREFIX": "{x}"},
			wantErr: "XCLOAK_KEY_PREFIX:",
		},
		{
			name:    "no hashing at all",
			env:     map[string]string{"XCLOAK_HASH_CONCURRENCY": "0"},
			wantErr: `XCLOAK_HASH_CONCURRENCY: "0" is not a whole number of at least 1`,
		},
		{
			name:    "hash concurrency past its bound",
			env:     map[string]string{"XCLOAK_HASH_CONCURRENCY": "99999999999"},
			wantErr: `XCLOAK_HASH_CONCURRENCY: 99999999999 is more than 256: each hash takes 19 MiB`,
		},
		{
			name:    "lockout threshold that is no number",
			args:    []string{"--lockout-threshold=ten"},
			wantErr: "--lockout-threshold (XCLOAK_LOCKOUT_THRESHOLD):",
		},
		{
			name:    "spraying over more accounts than a lockout remembers",
			env:     map[string]string{"XCLOAK_SPRAY_ACCOUNTS": "33"},
			wantErr: `XCLOAK_SPRAY_ACCOUNTS: "33" is not a whole number from 1 to 32`,
		},
		{
			name:    "spraying window shorter than a second",
			env:     map[string]string{"XCLOAK_SPRAY_WINDOW": "10ms"},
			wantErr: "XCLOAK_SPRAY_WINDOW: 10ms is not from 1s to 744h",
		},
		{
			name:    "breach corpus directory that does not exist",
			env:     map[string]string{"XCLOAK_BREACHED_PASSWORDS": "/nonexistent/pwned-ranges"},
			wantErr: "XCLOAK_BREACHED_PASSWORDS: breached: directory of ranges:",
		},
		{
			// It would find no password breached.
			name:    "breach corpus directory without a range file",
			env:     map[string]string{"XCLOAK_BREACHED_PASSWORDS": emptyCorpus},
			wantErr: "XCLOAK_BREACHED_PASSWORDS: breached: directory of ranges " + emptyCorpus + " holds no range files",
		},
		{
			name:    "breach corpus URL of another scheme",
			env:     map[string]string{"XCLOAK_BREACHED_PASSWORDS": "ftp://ranges.example/"},
			wantErr: "XCLOAK_BREACHED_PASSWORDS: breached: a URL must be http(s); anything else names a directory",
		},
		{
			name:    "breach corpus URL with a query",
			args:    []string{"--breached-passwords=https://ranges.example/?key=hunter2"},
			wantErr: "--breached-passwords (XCLOAK_BREACHED_PASSWORDS): breached: range API URL must be",
		},
		{
			name:    "breached lookup without a bound",
			env:     map[string]string{"XCLOAK_BREACHED_TIMEOUT": "0s"},
			wantErr: `XCLOAK_BREACHED_TIMEOUT: "0s" is not a duration from 10ms to 10s`,
		},
		{
			name:    "negative session lifetime",
			env:     map[string]string{"XCLOAK_SESSION_TTL": "-1h"},
			wantErr: "XCLOAK_SESSION_TTL: -1h is not positive",
		},
		{
			name:    "session idle time too short to notice",
			env:     map[string]string{"XCLOAK_SESSION_IDLE": "1m"},
			wantErr: "XCLOAK_SESSION_IDLE: 1m is not off or from 5m to 9600h",
		},
		{
			name:    "session idle time of nothing",
			env:     map[string]string{"XCLOAK_SESSION_IDLE": "0"},
			wantErr: "XCLOAK_SESSION_IDLE: 0 is not off or from 5m to 9600h",
		},
		{
			// Browsers keep a cookie 400 days at most.
			name:    "session longer than a cookie lasts",
			env:     map[string]string{"XCLOAK_SESSION_TTL": "9601h"},
			wantErr: "XCLOAK_SESSION_TTL: 9601h is not from 1m to 9600h",
		},
		{
			name:    "reset link working for a year",
			args:    []string{"--reset-ttl=8760h"},
			wantErr: "--reset-ttl (XCLOAK_RESET_TTL): 8760h is not from 1m to 168h",
		},
		{
			name:    "unlock link of a second",
			env:     map[string]string{"XCLOAK_UNLOCK_TTL": "1s"},
			wantErr: "XCLOAK_UNLOCK_TTL: 1s is not from 1m to 168h",
		},
		{
			name:    "held sign-in's link for two days",
			env:     map[string]string{"XCLOAK_VERIFICATION_TTL": "48h"},
			wantErr: "XCLOAK_VERIFICATION_TTL: 48h is not from 1m to 24h",
		},
		{
			name:    "second step for a day",
			env:     map[string]string{"XCLOAK_MFA_TTL": "24h"},
			wantErr: "XCLOAK_MFA_TTL: 24h is not from 30s to 1h",
		},
		{
			name:    "events kept for a century",
			env:     map[string]string{"XCLOAK_EVENT_RETENTION": "876000h"},
			wantErr: "XCLOAK_EVENT_RETENTION: 876000h is not from 1h to 87600h",
		},
		{
			name:    "reset lifetime without a unit",
			env:     map[string]string{"XCLOAK_RESET_TTL": "30"},
			wantErr: "XCLOAK_RESET_TTL:",
		},
		{
			name:    "longest lockout shorter than the first",
			env:     map[string]string{"XCLOAK_LOCKOUT_MAX_DURATION": "1m"},
			wantErr: "XCLOAK_LOCKOUT_MAX_DURATION: ratelimit: longest lockout 1m0s is shorter than the first, 15m0s",
		},
		{
			name:    "passkeys' RP ID an IP address",
			env:     map[string]string{"XCLOAK_WEBAUTHN_RP_ID": "192.0.2.1"},
			wantErr: `XCLOAK_WEBAUTHN_RP_ID: "192.0.2.1" is an IP address`,
		},
		{
			name:    "passkeys' origin over http",
			args:    []string{"--webauthn-origins", "https://login.example.com, http://app.example.com"},
			wantErr: `--webauthn-origins (XCLOAK_WEBAUTHN_ORIGINS): "http://app.example.com" is not https`,
		},
		{
			name: "passkeys' origin outside the RP ID",
			env: map[string]string{"XCLOAK_PUBLIC_URL": "https://login.example.com", "XCLOAK_WEBAUTHN_RP_ID": "example.com",
				"XCLOAK_WEBAUTHN_ORIGINS": "https://login.example.com,https://app.example.org",
				"XCLOAK_MAIL_LOG":         "true", "XCLOAK_ADDR": "127.0.0.1:0"},
			wantErr: "XCLOAK_WEBAUTHN_ORIGINS: https://app.example.org is neither on XCLOAK_WEBAUTHN_RP_ID example.com nor on a subdomain of it",
		},
		{
			name:    "passkeys' RP ID at a public URL with an IP address",
			env:     map[string]string{"XCLOAK_WEBAUTHN_RP_ID": "example.com", "XCLOAK_MAIL_LOG": "true", "XCLOAK_ADDR": "127.0.0.1:0"},
			wantErr: "XCLOAK_WEBAUTHN_RP_ID, XCLOAK_WEBAUTHN_ORIGINS: XCloak's pages are at an IP address",
		},
		{
			name:    "address without port",
			env:     map[string]string{"XCLOAK_ADDR": "localhost"},
			wantErr: "XCLOAK_ADDR:",
		},
		{
			name:    "redis URL with another scheme",
			env:     map[string]string{"XCLOAK_REDIS_URL": "http://u:hunter2@cache"},
			wantErr: "XCLOAK_REDIS_URL:",
		},
		{
			name:    "database URL without a database",
			args:    []string{"--database-url", "postgres://u:hunter2@db:5432"},
			wantErr: "--database-url (XCLOAK_DATABASE_URL): it names no database",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Settings are checked before anything connects, so the
			// stores are nowhere: a setting that is not checked fails to
			// connect instead of serving.
			vars := map[string]string{
				"XCLOAK_SECRET":       testSecret,
				"XCLOAK_REDIS_URL":    "redis://127.0.0.1:1",
				"XCLOAK_DATABASE_URL": "postgres://u:hunter2@127.0.0.1:1/none",
			}
			for k, v := range tt.env {
				vars[k] = v
			}
			stdout, stderr, err := xcloak(t, vars, "", append([]string{"serve"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if got := cli.ExitCode(err); got != 1 {
				t.Errorf("exit code = %d, want 1", got)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr = %q, want the error", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Errorf("stderr %q shows a password", stderr)
			}
		})
	}
}

func TestUserAdd(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	// Steps share the database, in order.
	steps := []struct {
		name       string
		args       []string
		stdin      string
		wantStdout string
		wantErr    string // substring of the error; "" for none
		wantCode   int
	}{
		{
			name:       "user",
			args:       []string{"--email", "Ann@Example.com"},
			stdin:      "correct horse battery\n",
			wantStdout: "created user ann@example.com\n",
		},
		{
			name:       "admin, password ending in CRLF",
			args:       []string{"--email", "boss@example.com", "--admin"},
			stdin:      "correct horse battery\r\n",
			wantStdout: "created user boss@example.com (admin)\n",
		},
		{
			name:     "existing user",
			args:     []string{"--email", "ann@example.com"},
			stdin:    "another password\n",
			wantErr:  "a user with email ann@example.com exists already",
			wantCode: 1,
		},
		{
			name:     "short password",
			args:     []string{"--email", "cat@example.com"},
			stdin:    "short\n",
			wantErr:  "password refused: password does not meet the rules: shorter than 8 characters",
			wantCode: 1,
		},
		{
			name:     "password with a NUL byte",
			args:     []string{"--email", "cat@example.com"},
			stdin:    "correct horse\x00battery\n",
			wantErr:  "password refused: password does not meet the rules: it holds a NUL byte",
			wantCode: 1,
		},
		{
			name:     "password not UTF-8",
			args:     []string{"--email", "cat@example.com"},
			stdin:    "correct horse caf\xe9\n",
			wantErr:  "password refused: password does not meet the rules: it is not valid UTF-8",
			wantCode: 1,
		},
		{
			name:     "password ending in a carriage return",
			args:     []string{"--email", "cat@example.com"},
			stdin:    "correct horse battery\r",
			wantErr:  "password refused: it ends in a carriage return",
			wantCode: 1,
		},
		{
			name:     "empty password",
			args:     []string{"--email", "cat@example.com"},
			stdin:    "\n",
			wantErr:  "no password on stdin",
			wantCode: 1,
		},
		{
			name:     "no input",
			args:     []string{"--email", "cat@example.com"},
			wantErr:  "no password on stdin",
			wantCode: 1,
		},
		{
			name:     "not an address",
			args:     []string{"--email", "cat"},
			stdin:    "correct horse battery\n",
			wantErr:  `--email "cat" is not a mail address`,
			wantCode: 1,
		},
		{
			name:     "no address",
			stdin:    "correct horse battery\n",
			wantErr:  "--email is required",
			wantCode: 2,
		},
	}
	for _, st := range steps {
		stdout, stderr, err := xcloak(t, vars, st.stdin, append([]string{"user", "add"}, st.args...)...)
		if st.wantErr == "" {
			if err != nil {
				t.Fatalf("%s: err = %v, want nil\nstderr:\n%s", st.name, err, stderr)
			}
		} else {
			if err == nil || !strings.Contains(err.Error(), st.wantErr) {
				t.Fatalf("%s: err = %v, want one containing %q", st.name, err, st.wantErr)
			}
			if got := cli.ExitCode(err); got != st.wantCode {
				t.Errorf("%s: exit code = %d, want %d", st.name, got, st.wantCode)
			}
			if !strings.Contains(stderr, st.wantErr) {
				t.Errorf("%s: stderr = %q, want the error", st.name, stderr)
			}
		}
		if stdout != st.wantStdout {
			t.Errorf("%s: stdout = %q, want %q", st.name, stdout, st.wantStdout)
		}
	}

	conn := connect(t, vars["XCLOAK_DATABASE_URL"])
	rows, err := conn.Query(t.Context(), `SELECT email FROM users WHERE is_admin ORDER BY email`)
	if err != nil {
		t.Fatal(err)
	}
	admins, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(admins, ",") != "boss@example.com" {
		t.Errorf("admins = %v, want [boss@example.com]", admins)
	}
}

func TestUserUnlock(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	// Room in the account's rate limit for the sign-ins after the unlock;
	// the lockout itself keeps its default threshold of 10.
	vars["XCLOAK_LIMIT_LOGIN_ACCOUNT"] = "30/10m"
	const email, password = "ann@example.com", "correct horse battery"
	addUser(t, vars, email, password+"\r\n")
	srv := startServe(t, vars)

	for i := range 10 {
		if resp := signIn(t, srv.base, email, fmt.Sprint("wrong password ", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: status = %d, want %d", i+1, resp.StatusCode, http.StatusUnauthorized)
		}
	}
	if resp := signIn(t, srv.base, email, password); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right password while locked: status = %d, want %d", resp.StatusCode, http.StatusTooManyRequests)
	}

	steps := []struct{ name, wantStdout string }{
		{"locked", "unlocked ann@example.com\n"},
		{"unlocked already", "ann@example.com was not locked\n"},
	}
	for _, st := range steps {
		stdout, stderr, err := xcloak(t, vars, "", "user", "unlock", "--email", "ANN@example.com")
		if err != nil {
			t.Fatalf("%s: err = %v, want nil\nstderr:\n%s", st.name, err, stderr)
		}
		if stdout != st.wantStdout {
			t.Errorf("%s: stdout = %q, want %q", st.name, stdout, st.wantStdout)
		}
	}
	// The command is another process: the server may repeat Redis' last
	// "locked" from memory for up to XCLOAK_REJECTION_MEMORY (1s), and no
	// longer (the bound is for a server that never forgets it: a loaded
	// machine may take seconds over each sign-in).
	unlockedAt := time.Now()
	for {
		resp := signIn(t, srv.base, email, password)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests || time.Since(unlockedAt) > 20*time.Second {
			t.Fatalf("right password after unlock: status = %d after %v, want %d once the rejection memory has passed", resp.StatusCode, time.Since(unlockedAt), http.StatusOK)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The command wrote its event before it returned, and the lockout
	// record says who ended it.
	conn := connect(t, vars["XCLOAK_DATABASE_URL"])
	var unlocks int
	if err := conn.QueryRow(t.Context(),
		`SELECT count(*) FROM security_events WHERE kind = 'unlock' AND detail->>'by' = 'cli'`).Scan(&unlocks); err != nil {
		t.Fatal(err)
	}
	if unlocks != 1 {
		t.Errorf("unlock events by cli = %d, want 1", unlocks)
	}
	var clearedBy string
	if err := conn.QueryRow(t.Context(), `SELECT coalesce(cleared_by, '') FROM lockouts WHERE account_key = $1`, email).Scan(&clearedBy); err != nil {
		t.Fatal(err)
	}
	if clearedBy != "cli" {
		t.Errorf("lockout cleared_by = %q, want cli", clearedBy)
	}
}

// TestUserSignOut: the command ends the browser's session and forgets it
// as a device, so during a lockout it is held like any browser.
func TestUserSignOut(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	vars["XCLOAK_LIMIT_LOGIN_ACCOUNT"] = "30/10m"
	const email, password = "ann@example.com", "correct horse battery"
	addUser(t, vars, email, password+"\n")
	srv := startServe(t, vars)
	resp := signIn(t, srv.base, email, password)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	var device *http.Cookie
	for _, c := range resp.Cookies() {
		if strings.Contains(c.Name, "xcloak_device_") {
			device = c
		}
	}
	if device == nil {
		t.Fatal("no device cookie")
	}

	stdout, stderr, err := xcloak(t, vars, "", "user", "sign-out", "--email", "ANN@example.com")
	if err != nil || stdout != "signed out ann@example.com everywhere\n" {
		t.Fatalf("sign-out: %v, stdout %q\nstderr:\n%s", err, stdout, stderr)
	}
	if _, _, err := xcloak(t, vars, "", "user", "sign-out", "--email", "nobody@example.com"); err == nil || !strings.Contains(err.Error(), "no account") {
		t.Fatalf("sign-out of an unknown account: %v, want an error", err)
	}
	var sessions, devices int
	conn := connect(t, vars["XCLOAK_DATABASE_URL"])
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM devices)`).Scan(&sessions, &devices); err != nil {
		t.Fatal(err)
	}
	if sessions != 0 || devices != 0 {
		t.Fatalf("after sign-out: %d sessions, %d devices; want none", sessions, devices)
	}
	for i := range 10 {
		if resp := signIn(t, srv.base, email, fmt.Sprint("wrong password ", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: status = %d", i+1, resp.StatusCode)
		}
	}
	body, _ := json.Marshal(map[string]string{"email": email, "password": password})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.base+"/api/v1/login", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: device.Name, Value: device.Value})
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("forgotten device during the lockout: %d, want 429", resp.StatusCode)
	}
}

func TestShutdownWritesQueuedEvents(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	const email, password = "ann@example.com", "correct horse battery"
	addUser(t, vars, email, password+"\n")
	srv := startServe(t, vars)

	const successes, failures = 3, 2
	for range successes {
		if resp := signIn(t, srv.base, email, password); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in: status = %d, want %d", resp.StatusCode, http.StatusOK)
		}
	}
	for range failures {
		if resp := signIn(t, srv.base, email, "wrong password"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password: status = %d, want %d", resp.StatusCode, http.StatusUnauthorized)
		}
	}
	// Cancel at once: the last events are still queued, and shutdown must
	// write them.
	if err := srv.stop(); err != nil {
		t.Fatalf("run returned %v after cancel, want nil\nstderr:\n%s", err, srv.stderr.String())
	}

	conn := connect(t, vars["XCLOAK_DATABASE_URL"])
	for kind, want := range map[string]int{"login_succeeded": successes, "login_failed": failures} {
		var got int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM security_events WHERE kind = $1`, kind).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s events = %d, want %d", kind, got, want)
		}
	}
}

// connect opens a connection to the test's database, closed when it ends.
func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestReadPassword(t *testing.T) {
	long := strings.Repeat("x", 1025)
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "pw\n", want: "pw"},
		{in: "pw\r\n", want: "pw"},
		{in: "pw", want: "pw"},
		{in: "pw\r", wantErr: "ends in a carriage return"},
		{in: "pw\r\r\n", wantErr: "ends in a carriage return"},
		{in: "p\rw\n", want: "p\rw"},
		{in: " spaced pw \nsecond line\n", want: " spaced pw "},
		{in: strings.Repeat("x", 1024) + "\r\n", want: strings.Repeat("x", 1024)},
		{in: "\n", wantErr: "no password"},
		{in: "", wantErr: "no password"},
		{in: "\r\n", wantErr: "no password"},
		{in: long + "\n", wantErr: "longer than 1024 bytes"},
		{in: long + long, wantErr: "longer than 1024 bytes"},
	}
	for _, tt := range tests {
		got, err := readPassword(strings.NewReader(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("readPassword(%.20q) err = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("readPassword(%.20q) = %.20q, %v; want %.20q", tt.in, got, err, tt.want)
		}
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Postgres(t)
	vars := environ(map[string]string{"XCLOAK_DATABASE_URL": dbURL})

	// The latest migration's version, from the files' NNNNN_ prefixes.
	files, err := filepath.Glob("../../migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migration files: %v", err)
	}
	latest := strings.SplitN(filepath.Base(files[len(files)-1]), "_", 2)[0]
	version := strings.TrimLeft(latest, "0")

	// A second run finds nothing to do and reports the same version.
	for _, attempt := range []string{"first", "second"} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), []string{"xcloak", "migrate"}, vars, strings.NewReader(""), &stdout, &stderr)
		if err != nil {
			t.Fatalf("%s migrate: %v\nstderr:\n%s", attempt, err, stderr.String())
		}
		if got, want := stdout.String(), "at schema version "+version+"\n"; !strings.HasSuffix(got, want) {
			t.Errorf("%s migrate printed %q, want it to end with %q", attempt, got, want)
		}
	}

	// A schema a newer build migrated is left as it is, and said to be.
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1::bigint + 1, true)", version); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"xcloak", "migrate"}, vars, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("migrate on a newer schema: %v\nstderr:\n%s", err, stderr.String())
	}
	if want := "newer than this build's (" + version + ")"; !strings.Contains(stdout.String(), want) {
		t.Errorf("migrate on a newer schema printed %q, want it to say %q", stdout.String(), want)
	}
}

func TestHelp(t *testing.T) {
	tests := [][]string{
		{"xcloak", "--help"},
		{"xcloak", "-h"},
		{"xcloak", "help"},
		{"xcloak", "serve", "--help"},
		{"xcloak", "serve", "-h"},
		{"xcloak", "migrate", "--help"},
		{"xcloak", "user", "--help"},
		{"xcloak", "user", "help"},
		{"xcloak", "user", "add", "--help"},
		{"xcloak", "user", "unlock", "-h"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args[1:], " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			// The environment holds passwords that help must not print.
			vars := environ(map[string]string{
				"XCLOAK_DATABASE_URL": "postgres://u:hunter2@127.0.0.1/x",
				"XCLOAK_SECRET":       "hunter2-hunter2-hunter2-hunter2-hunter2",
			})
			err := run(t.Context(), args, vars, strings.NewReader(""), &stdout, &stderr)
			if err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			if !strings.HasPrefix(stdout.String(), "usage: xcloak") {
				t.Errorf("stdout = %q, want the usage", stdout.String())
			}
			if stderr.Len() != 0 {
				t.Errorf("stderr = %q, want nothing", stderr.String())
			}
			if strings.Contains(stdout.String(), "hunter2") {
				t.Errorf("help shows a password from the environment:\n%s", stdout.String())
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"no command", []string{"xcloak"}, "no command given"},
		{"unknown command", []string{"xcloak", "frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"xcloak", "serve", "--frobnicate"}, "flag provided but not defined"},
		{"stray argument", []string{"xcloak", "migrate", "now"}, `unexpected argument "now"`},
		{"no user command", []string{"xcloak", "user"}, "no command given"},
		{"unknown user command", []string{"xcloak", "user", "rename"}, `unknown command "rename"`},
		{"user add without email", []string{"xcloak", "user", "add"}, "--email is required"},
		{"user unlock with a stray argument", []string{"xcloak", "user", "unlock", "--email", "a@b", "now"}, `unexpected argument "now"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, nil, strings.NewReader(""), &stdout, &stderr)
			if err == nil {
				t.Fatal("err = nil, want a usage error")
			}
			if got := cli.ExitCode(err); got != 2 {
				t.Errorf("exit code = %d, want 2", got)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) || !strings.Contains(stderr.String(), "usage: xcloak") {
				t.Errorf("stderr = %q, want %q and the usage", stderr.String(), tt.wantStderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

// withPassword returns dbURL with a password in it, and that password. A URL
// that has one keeps it; otherwise a made-up one is added, which servers with
// trust authentication ignore.
func withPassword(t *testing.T, dbURL string) (string, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		t.Fatalf("test database URL is not a URL")
	}
	if pw, ok := u.User.Password(); ok {
		return dbURL, pw
	}
	const secret = "never-logged-8f3a"
	user := "postgres"
	if u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	u.User = url.UserPassword(user, secret)
	return u.String(), secret
}

// TestUserUnlockAppAccount: "user unlock" ends the lockout of an
// application's account named as the dashboard lists it, "app NAME
// ACCOUNT", its account folded as the decision API folds it; a name that
// is no application's account is refused.
func TestUserUnlockAppAccount(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	vars["XCLOAK_LIMIT_LOGIN_ACCOUNT"] = "30/10m"
	srv := startServe(t, vars)
	stdout, stderr, err := xcloak(t, vars, "", "apikey", "add", "--name", "shop")
	if err != nil {
		t.Fatalf("apikey add: %v\n%s", err, stderr)
	}
	key, _, _ := strings.Cut(stdout, "\n")
	call := func(path, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	attempt := func(i int) (int, map[string]any) {
		return call("/api/v1/attempts", fmt.Sprintf(`{"kind":"login","account":"Bob","client_ip":"198.51.100.%d"}`, i+1))
	}
	for i := range 10 {
		status, out := attempt(i)
		if status != http.StatusOK {
			t.Fatalf("attempt %d: %d %v", i+1, status, out)
		}
		if status, out := call(fmt.Sprintf("/api/v1/attempts/%s/outcome", out["attempt_id"]), `{"result":"failure"}`); status != http.StatusNoContent {
			t.Fatalf("outcome %d: %d %v", i+1, status, out)
		}
	}
	if status, out := attempt(20); status != http.StatusTooManyRequests || out["reason"] != "locked" {
		t.Fatalf("after ten failures: %d %v, want 429 locked", status, out)
	}
	for _, bad := range []string{"app shop", "app sh@p bob", "app  bob"} {
		if _, _, err := xcloak(t, vars, "", "user", "unlock", "--email", bad); err == nil || !strings.Contains(err.Error(), "is not an application's account") {
			t.Errorf("unlock --email %q: %v, want it refused", bad, err)
		}
	}
	if stdout, stderr, err := xcloak(t, vars, "", "user", "unlock", "--email", "app shop BOB"); err != nil || stdout != "unlocked app shop bob\n" {
		t.Fatalf("unlock: %q, %v\n%s", stdout, err, stderr)
	}
	unlockedAt := time.Now()
	for {
		status, out := attempt(21)
		if status == http.StatusOK {
			break
		}
		if time.Since(unlockedAt) > 20*time.Second {
			t.Fatalf("after the unlock: %d %v, want 200 once the rejection memory has passed", status, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
