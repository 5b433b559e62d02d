package main

import (
	"encoding/json"
	"fmt"
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

// TestCommandsAuditStream: the security events of the user and apikey
// commands are lines of the audit stream on stderr, as serve writes them,
// unless XCLOAK_AUDIT_LOG is off; the commands' other log lines stay
// quiet. Each command that succeeds writes one row and, with the stream
// on, one line that says what the row says: user add the account, its
// role and "cli", apikey add and revoke the application and the key's id,
// never the key. A command refused (an address that exists, a name in
// force, no key in force) writes neither.
func TestCommandsAuditStream(t *testing.T) {
	t.Parallel()
	for _, audit := range []string{"on", "off"} {
		t.Run(audit, func(t *testing.T) {
			t.Parallel()
			vars := storeSettings(t)
			vars["XCLOAK_AUDIT_LOG"] = audit
			const password = "correct horse battery\n"
			steps := []struct {
				args  []string
				stdin string
				kind  string // "": refused
			}{
				{[]string{"user", "add", "--email", "ann@example.com", "--admin"}, password, "user_created"},
				{[]string{"user", "add", "--email", "ANN@example.com"}, password, ""},
				{[]string{"user", "add", "--email", "bob@example.com"}, password, "user_created"},
				{[]string{"user", "disable", "--email", "bob@example.com"}, "", "user_disabled"},
				{[]string{"user", "signout", "--email", "bob@example.com"}, "", "signed_out_everywhere"},
				{[]string{"apikey", "add", "--name", "shop"}, "", "api_key_created"},
				{[]string{"apikey", "add", "--name", "shop"}, "", ""},
				{[]string{"apikey", "revoke", "--name", "shop"}, "", "api_key_revoked"},
				{[]string{"apikey", "revoke", "--name", "shop"}, "", ""},
				{[]string{"apikey", "revoke", "--name", "blog"}, "", ""},
			}
			var key string
			var lines []map[string]any
			for _, st := range steps {
				cmd := strings.Join(st.args, " ")
				stdout, stderr, err := xcloak(t, vars, st.stdin, st.args...)
				if (err == nil) != (st.kind != "") {
					t.Fatalf("%s: %v, want it to succeed: %v\nstderr:\n%s", cmd, err, st.kind != "", stderr)
				}
				if st.kind == "api_key_created" {
					key, _, _ = strings.Cut(stdout, "\n")
				}
				var got []map[string]any
				for l := range strings.Lines(stderr) {
					var line map[string]any
					if err := json.Unmarshal([]byte(l), &line); err != nil {
						if st.kind != "" || strings.Contains(l, `"audit"`) {
							t.Errorf("%s: stderr line is not JSON: %v\n%s", cmd, err, l)
						}
						continue // a refused command's error
					}
					if line["log"] != "audit" || line["msg"] != "security event" || line["level"] != "INFO" {
						t.Errorf("%s: stderr line %s is not of the audit stream", cmd, l)
						continue
					}
					got = append(got, line)
				}
				want := 1
				if st.kind == "" || audit == "off" {
					want = 0
				}
				if len(got) != want || want == 1 && got[0]["event"] != st.kind {
					t.Errorf("%s: audit lines %v, want %d of %s", cmd, got, want, st.kind)
				}
				lines = append(lines, got...)
			}
			if !strings.HasPrefix(key, "xck_") {
				t.Fatalf("apikey add printed no key: %q", key)
			}

			// The rows, one per command that succeeded, each what its line
			// says.
			conn := connect(t, vars["XCLOAK_DATABASE_URL"])
			rows, err := conn.Query(t.Context(), `SELECT kind, coalesce(account_key, ''), detail FROM security_events ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			type row struct {
				Kind, Account string
				Detail        map[string]string
			}
			var stored []row
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.Kind, &r.Account, &r.Detail); err != nil {
					t.Fatal(err)
				}
				stored = append(stored, r)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			var kinds, wantKinds []string
			for _, r := range stored {
				kinds = append(kinds, r.Kind)
			}
			for _, st := range steps {
				if st.kind != "" {
					wantKinds = append(wantKinds, st.kind)
				}
			}
			if fmt.Sprint(kinds) != fmt.Sprint(wantKinds) {
				t.Fatalf("rows %v, want %v", kinds, wantKinds)
			}
			keyID := ""
			for _, r := range stored {
				if r.Kind == "api_key_created" {
					keyID = r.Detail["key_id"]
				}
			}
			for i, r := range stored {
				if r.Detail["by"] != "cli" {
					t.Errorf("row %d %v: by %q, want cli", i, r, r.Detail["by"])
				}
				switch r.Kind {
				case "user_created":
					role := map[string]string{"ann@example.com": "admin", "bob@example.com": "member"}[r.Account]
					if role == "" || len(r.Detail) != 2 || r.Detail["role"] != role {
						t.Errorf("row %d %v: want ann as admin or bob as member, by cli", i, r)
					}
				case "api_key_created", "api_key_revoked":
					if r.Account != "" || len(r.Detail) != 3 || r.Detail["app"] != "shop" || r.Detail["key_id"] != keyID ||
						keyID == "" {
						t.Errorf("row %d %v: want app shop and the key's id, by cli, no account", i, r)
					}
				}
				for _, v := range r.Detail {
					if strings.Contains(v, key[4:12]) {
						t.Errorf("row %d %v holds part of the key", i, r)
					}
				}
			}
			if audit == "off" {
				return
			}
			if len(lines) != len(stored) {
				t.Fatalf("%d audit lines for %d rows", len(lines), len(stored))
			}
			for i, l := range lines {
				// The line's app is the row's detail "app".
				detail := map[string]string{}
				if d, ok := l["detail"].(map[string]any); ok {
					for k, v := range d {
						detail[k] = fmt.Sprint(v)
					}
				}
				if app, ok := l["app"].(string); ok {
					detail["app"] = app
				}
				r := stored[i]
				if l["event"] != r.Kind || l["account"] != r.Account || fmt.Sprint(detail) != fmt.Sprint(r.Detail) {
					t.Errorf("audit line %v, want the row %v", l, r)
				}
				if b, _ := json.Marshal(l); strings.Contains(string(b), key[4:12]) {
					t.Errorf("audit line %s holds part of the key", b)
				}
			}
		})
	}
}
