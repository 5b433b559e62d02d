package main

import (
	"context"
	"strings"
	"testing"
)

// TestServeRefusesMFAKeyThatDoesNotOpen: serve does not start on a
// database holding an authenticator app sealed with a key it lacks, or
// with a key that does not open it, and says which in an error naming
// XCLOAK_MFA_KEY, never the key. The user commands still run: removing the
// factors of a key that is lost is how serve starts again.
func TestServeRefusesMFAKeyThatDoesNotOpen(t *testing.T) {
	t.Parallel()
	vars := storeSettings(t)
	addUser(t, vars, "ann@example.com", "correct horse battery\n")
	conn := connect(t, vars["XCLOAK_DATABASE_URL"])
	// Sealed (its first byte 1) with a key no test knows.
	if _, err := conn.Exec(t.Context(), `INSERT INTO second_factors (user_id, kind, name, secret, created_at, confirmed_at)
		SELECT id, 'totp', 'app', '\x01'::bytea || decode(repeat('5a', 44), 'hex'), now(), now() FROM users WHERE email = 'ann@example.com'`); err != nil {
		t.Fatal(err)
	}
	const key = "4f1c9b2e7a0d38c5e6b1f4a2d9c07e3b5a8f1d6c2e9b4a7f0c3d8e1b6a5f2c9d"

	for _, tt := range []struct {
		name    string
		key     string
		wantErr string
	}{
		{"no key", "", "XCLOAK_MFA_KEY is not set (nor XCLOAK_MFA_KEY_FILE), and the database holds authenticator-app secrets sealed with it"},
		{"another key", key, "XCLOAK_MFA_KEY is not the key the database's authenticator-app secrets were sealed with"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := map[string]string{"XCLOAK_MFA_KEY": tt.key}
			for k, val := range vars {
				v[k] = val
			}
			stderr, err := serveUntilListening(t, v)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("serve: %v, want an error containing %q\nstderr:\n%s", err, tt.wantErr, stderr)
			}
			if strings.Contains(err.Error()+stderr, key) {
				t.Errorf("serve's error or log shows the key:\n%v\n%s", err, stderr)
			}
		})
	}

	if stdout, stderr, err := xcloak(t, vars, "", "user", "remove-factors", "--email", "ann@example.com"); err != nil ||
		stdout != "removed the second factor of ann@example.com\n" {
		t.Fatalf("remove-factors without the key: %v, stdout %q\nstderr:\n%s", err, stdout, stderr)
	}
	// No sealed factor left: any key starts, this one too.
	vars["XCLOAK_MFA_KEY"] = key
	if err := startServe(t, vars).stop(); err != nil {
		t.Errorf("serve once the factor is removed: %v", err)
	}
}

// serveUntilListening runs "xcloak serve" with vars, and returns its log
// and what it returned: the error of a start it refused, or nil once a
// server that started has been stopped.
func serveUntilListening(t *testing.T, vars map[string]string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr lockedBuffer
	// A server that starts says so on stdout, and is stopped at once.
	listening := writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil })
	err := run(ctx, []string{"xcloak", "serve", "--addr", "127.0.0.1:0"}, environ(vars), strings.NewReader(""), listening, &stderr)
	return stderr.String(), err
}
