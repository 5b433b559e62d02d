package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestServeAuditStream: serve writes a failed sign-in to stderr as one JSON
// line of the audit stream, unless XCLOAK_AUDIT_LOG is off, whatever
// XCLOAK_LOG_LEVEL is: the stream is a record, not a diagnostic.
func TestServeAuditStream(t *testing.T) {
	t.Parallel()
	for _, audit := range []string{"on", "off", "on at warn"} {
		t.Run(audit, func(t *testing.T) {
			vars := storeSettings(t)
			vars["XCLOAK_AUDIT_LOG"], _, _ = strings.Cut(audit, " ")
			if strings.HasSuffix(audit, "warn") {
				vars["XCLOAK_LOG_LEVEL"] = "warn"
			}
			addUser(t, vars, "ann@example.com", "correct horse battery\n")
			srv := startServe(t, vars)
			if resp := signIn(t, srv.base, "ann@example.com", "wrong password"); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("wrong password: status = %d, want %d", resp.StatusCode, http.StatusUnauthorized)
			}
			// Shutdown writes the queued event, and so its line.
			if err := srv.stop(); err != nil {
				t.Fatalf("run returned %v\nstderr:\n%s", err, srv.stderr.String())
			}
			var failed []map[string]any
			for l := range strings.Lines(srv.stderr.String()) {
				var line map[string]any
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatalf("stderr line is not JSON: %v\n%s", err, l)
				}
				if line["log"] == "audit" && line["event"] == "login_failed" {
					failed = append(failed, line)
				}
			}
			want := 1
			if audit == "off" {
				want = 0
			}
			if len(failed) != want {
				t.Fatalf("%d audit lines of the failed sign-in, want %d\nstderr:\n%s", len(failed), want, srv.stderr.String())
			}
			if want == 1 && (failed[0]["account"] != "ann@example.com" || failed[0]["source"] != "127.0.0.1" || failed[0]["count"] != 1.0) {
				t.Errorf("audit line = %v", failed[0])
			}
		})
	}
}

// TestCommandsAuditStream: the security events of the user commands are
// lines of the audit stream on stderr, as serve writes them, unless
// XCLOAK_AUDIT_LOG is off; the commands' other log lines stay quiet.
func TestCommandsAuditStream(t *testing.T) {
	t.Parallel()
	for _, audit := range []string{"on", "off"} {
		t.Run(audit, func(t *testing.T) {
			t.Parallel()
			vars := storeSettings(t)
			addUser(t, vars, "ann@example.com", "correct horse battery\n")
			vars["XCLOAK_AUDIT_LOG"] = audit
			var kinds []string
			for _, cmd := range []string{"disable", "signout"} {
				_, stderr, err := xcloak(t, vars, "", "user", cmd, "--email", "ann@example.com")
				if err != nil {
					t.Fatalf("user %s: %v\nstderr:\n%s", cmd, err, stderr)
				}
				for l := range strings.Lines(stderr) {
					var line map[string]any
					if err := json.Unmarshal([]byte(l), &line); err != nil {
						t.Fatalf("user %s: stderr line is not JSON: %v\n%s", cmd, err, l)
					}
					if line["log"] != "audit" || line["msg"] != "security event" || line["level"] != "INFO" {
						t.Errorf("user %s: stderr line %s is not of the audit stream", cmd, l)
						continue
					}
					detail, _ := line["detail"].(map[string]any)
					if line["account"] != "ann@example.com" || detail["by"] != "cli" {
						t.Errorf("user %s: audit line %s", cmd, l)
					}
					kinds = append(kinds, line["event"].(string))
				}
			}
			want := "user_disabled signed_out_everywhere"
			if audit == "off" {
				want = ""
			}
			if got := strings.Join(kinds, " "); got != want {
				t.Errorf("audit lines of the commands: %q, want %q", got, want)
			}
		})
	}
}
