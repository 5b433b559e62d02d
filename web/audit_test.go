package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// lockedBuffer is a log's output, written by the recorder's goroutine and
// read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// auditLines returns the audit stream's lines of the log, raw and decoded.
func (b *lockedBuffer) auditLines(t *testing.T) ([]string, []map[string]any) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var raw []string
	var lines []map[string]any
	for l := range strings.Lines(b.buf.String()) {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line is not JSON: %v\n%s", err, l)
		}
		if line["log"] == auth.AuditLog {
			raw, lines = append(raw, l), append(lines, line)
		}
	}
	return raw, lines
}

// TestAuditStreamMatchesRows: over HTTP and the real Postgres, failed
// sign-ins, the lockout they cause, the rejections of a flood during it
// and a password reset are each one line of the audit stream per row of
// security_events, in the same order, with the row's kind, account, user,
// network, rule, time and count; and no line carries a password or the
// reset token.
func TestAuditStreamMatchesRows(t *testing.T) {
	var log lockedBuffer
	env := xcloaktest.New(t, xcloaktest.Options{
		Auth:   func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginAccount, 100) },
		Logger: slog.New(slog.NewJSONHandler(&log, nil)),
	})
	base := env.Start(t)
	env.AddUser(t, "owner@example.com", "owner password", false)
	env.AddUser(t, "ann@example.com", "ann's old password", false)

	attacker := xcloaktest.Client(t, "127.0.15.1")
	for i := range env.Auth.Lockout.Threshold {
		if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", fmt.Sprint("guess", i))); resp.StatusCode != 401 {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	const flood = 40
	for i := range flood {
		if resp, _ := post(t, attacker, base+"/api/v1/login", jsonType, loginJSON("owner@example.com", fmt.Sprint("more", i))); resp.StatusCode != 429 {
			t.Fatalf("attempt %d during the lockout: %d", i, resp.StatusCode)
		}
	}

	ann := xcloaktest.Client(t, "127.0.15.2")
	if resp, _ := post(t, ann, base+"/api/v1/password-reset", jsonType, `{"email":"ann@example.com"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("reset request: %d", resp.StatusCode)
	}
	m := resetLink.FindStringSubmatch(env.Mail.WaitFor(t, "ann@example.com").Body)
	if m == nil {
		t.Fatal("no reset link in the mail")
	}
	token, newPassword := m[1], "ann's brand new password"
	if resp, body := post(t, ann, base+"/api/v1/password-reset/confirm", jsonType,
		fmt.Sprintf(`{"token":%q,"password":%q}`, token, newPassword)); resp.StatusCode != http.StatusOK {
		t.Fatalf("reset: %d %s", resp.StatusCode, body)
	}
	env.Flush(t)

	raw, lines, counts := auditMatchesRows(t, env, &log)
	lineCounts := map[string]int{}
	for _, line := range lines {
		lineCounts[line["event"].(string)] += int(line["count"].(float64))
	}
	for kind, want := range map[string]int{
		auth.EventLoginFailed: env.Auth.Lockout.Threshold, auth.EventLockout: 1, auth.EventLoginRejected: flood,
		auth.EventResetRequested: 1, auth.EventResetCompleted: 1,
	} {
		if counts[kind] != want || lineCounts[kind] != want {
			t.Errorf("%s: rows count %d, lines %d; want %d", kind, counts[kind], lineCounts[kind], want)
		}
	}

	for _, secret := range []string{token, newPassword, "ann's old password", "owner password", "guess0", "more0", "$argon2"} {
		for _, l := range raw {
			if strings.Contains(l, secret) {
				t.Errorf("audit line carries %q:\n%s", secret, l)
			}
		}
	}
}

// auditMatchesRows checks that the audit lines of log are env's rows of
// security_events one for one, in order, with the same fields, and returns
// the lines, raw and decoded, and the events the rows count by kind.
func auditMatchesRows(t *testing.T, env *xcloaktest.Env, log *lockedBuffer) ([]string, []map[string]any, map[string]int) {
	t.Helper()
	type row struct {
		at      time.Time
		kind    string
		account string
		userID  int64
		source  string
		detail  map[string]string
	}
	dbRows, err := env.DB.Query(context.Background(),
		`SELECT at, kind, coalesce(account_key, ''), coalesce(user_id, 0), coalesce(ip, ''), detail FROM security_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	for dbRows.Next() {
		var r row
		if err := dbRows.Scan(&r.at, &r.kind, &r.account, &r.userID, &r.source, &r.detail); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if err := dbRows.Err(); err != nil {
		t.Fatal(err)
	}

	raw, lines := log.auditLines(t)
	if len(lines) != len(rows) {
		t.Fatalf("%d audit lines for %d rows:\n%s", len(lines), len(rows), strings.Join(raw, ""))
	}
	counts := map[string]int{}
	for i, r := range rows {
		count := 1
		if r.kind == auth.EventLoginRejected || r.detail["folded"] == "true" {
			if n, err := strconv.Atoi(r.detail["count"]); err == nil {
				count = n
			}
		}
		counts[r.kind] += count
		want := map[string]any{
			"time": r.at.UTC().Format(time.RFC3339Nano), "msg": auth.AuditMessage, "event": r.kind,
			"account": r.account, "source": r.source, "rule": r.detail["rule"], "count": float64(count),
		}
		if r.userID != 0 {
			want["user_id"] = float64(r.userID)
		}
		for name, v := range want {
			if lines[i][name] != v {
				t.Errorf("row %d (%s): line's %s = %v, want %v\n%s", i, r.kind, name, lines[i][name], v, raw[i])
			}
		}
	}
	return raw, lines, counts
}

// TestAuditStreamHasAttackMode: attack mode's events, which the attack
// watch writes, are audit lines too.
func TestAuditStreamHasAttackMode(t *testing.T) {
	var log lockedBuffer
	env := xcloaktest.New(t, xcloaktest.Options{Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	for _, on := range []bool{true, false} {
		if _, err := env.Attack.SwitchAttack(t.Context(), on, "admin:root@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	env.Flush(t)
	_, _, counts := auditMatchesRows(t, env, &log)
	if counts[auth.EventAttackStarted] != 1 || counts[auth.EventAttackEnded] != 1 {
		t.Errorf("events by kind: %v; want an attack started and ended", counts)
	}
}
