package web_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestCancelledStatementAnswersUnavailable: a sign-in whose read of the
// account Postgres cancels, at the lock_timeout (55P03) or the
// statement_timeout (57014) serve bounds each connection with, is
// answered as Postgres being unavailable, 503 with the API's problem or
// the form's page, not 500: the statement is tried again at the next
// sign-in.
func TestCancelledStatementAnswersUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name, params, code string
	}{
		{"lock_timeout", "lock_timeout=200ms", "55P03"},
		{"statement_timeout", "statement_timeout=200ms&lock_timeout=0", "57014"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbURL, _ := testenv.Schema(t)
			u, err := url.Parse(dbURL)
			if err != nil {
				t.Skipf("the test database's URL %v is no URL", err)
			}
			if u.RawQuery != "" {
				u.RawQuery += "&"
			}
			u.RawQuery += tc.params
			var log syncBuffer
			env := xcloaktest.New(t, xcloaktest.Options{DatabaseURL: u.String(), Logger: slog.New(slog.NewJSONHandler(&log, nil))})
			base := env.Start(t)
			env.AddUser(t, "ann@example.com", "correct horse", false)

			holder, err := pgx.Connect(t.Context(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close(context.Background())
			tx, err := holder.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			if _, err := tx.Exec(t.Context(), "LOCK TABLE users IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}

			c := xcloaktest.Client(t, "127.0.33.1")
			resp, body := post(t, c, base+"/api/v1/login", jsonType, loginJSON("ann@example.com", "correct horse"))
			if resp.StatusCode != http.StatusServiceUnavailable || strings.TrimSpace(body) != `{"error":"unavailable"}` ||
				resp.Header.Get("Retry-After") == "" {
				t.Errorf("API sign-in: %d %s (Retry-After %q), want 503 {\"error\":\"unavailable\"} with a Retry-After",
					resp.StatusCode, body, resp.Header.Get("Retry-After"))
			}
			form := url.Values{"email": {"ann@example.com"}, "password": {"correct horse"}}.Encode()
			resp, body = post(t, c, base+"/login", formType, form)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "XCloak cannot answer right now.") {
				t.Errorf("form sign-in: %d, want 503 with the unavailable page\n%s", resp.StatusCode, body)
			}
			if got := strings.Count(log.String(), "(SQLSTATE "+tc.code+")"); got < 2 {
				t.Errorf("%d failures logged with SQLSTATE %s, want the 2 sign-ins'\n%s", got, tc.code, log.String())
			}
		})
	}
}
