package web_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/postgres"
	"github.com/xcloak/xcloak/web"
)

// TestEventSearch: administrators alone search events by account, network
// and kind, on the page, as CSV and as JSON; the filters combine; a bad
// filter is a 400 that says which; the export's cells cannot be taken for
// formulas.
func TestEventSearch(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	env.AddUser(t, memberEmail, anyPassword, false)
	visitor := xcloaktest.Client(t, "127.0.31.1")
	member := xcloaktest.Client(t, "127.0.31.2")
	signIn(t, member, base, memberEmail, anyPassword)
	admin := xcloaktest.Client(t, "127.0.31.3")
	signIn(t, admin, base, adminEmail, anyPassword)

	// An hour ago: within the events' retention, which the service's
	// janitor, running from the start, enforces.
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	if err := postgres.New(env.DB).InsertEvents(t.Context(), auth.NewEventBatchID(), []auth.Event{
		{At: t0, Kind: auth.EventLoginFailed, Account: "ann@example.com", Source: "2001:db8:7::/64"},
		{At: t0.Add(time.Second), Kind: auth.EventLockout, Account: "ann@example.com", Source: "2001:db8:7::/64"},
		{At: t0.Add(2 * time.Second), Kind: auth.EventLoginFailed, Account: "=1+2", Source: "192.0.2.7",
			Detail: map[string]string{"note": "-x"}},
	}); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/admin/events", "/admin/events.csv", "/api/v1/admin/events"} {
		resp, _ := get(t, visitor, base+path)
		if want := map[bool]int{true: 401, false: 303}[strings.HasPrefix(path, "/api/")]; resp.StatusCode != want {
			t.Errorf("visitor %s: %d, want %d", path, resp.StatusCode, want)
		}
		if resp, _ := get(t, member, base+path); resp.StatusCode != http.StatusForbidden {
			t.Errorf("member %s: %d, want 403", path, resp.StatusCode)
		}
		for _, bad := range []struct{ query, says string }{
			{"kind=login_exploded", "kind is not a known event kind"},
			{"network=192.0.2.300", "network must be an IP address"},
			{"kind=lockout&kind=unlock", "kind is given more than once"},
			{"before=yesterday", "page of events does not exist"},
			{"account=a%00b@example.com", "account must be UTF-8 without control characters"},
			{"account=%ff", "account must be UTF-8 without control characters"},
		} {
			resp, body := get(t, admin, base+path+"?"+bad.query)
			if strings.HasPrefix(path, "/api/") && strings.HasPrefix(bad.query, "before=") {
				bad.says = `"error":"invalid_request"` // the API names no field for a cursor
			}
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, bad.says) {
				t.Errorf("%s?%s: %d %s, want 400 saying %q", path, bad.query, resp.StatusCode, body, bad.says)
			}
		}
	}

	// The page: an IPv6 address finds its /64's events; each account and
	// network links to its search.
	resp, body := get(t, admin, base+"/admin/events?"+url.Values{"network": {"2001:db8:7::1"}, "account": {"ANN@example.com"}}.Encode())
	if resp.StatusCode != http.StatusOK || strings.Count(body, "<tr>") != 3 ||
		!strings.Contains(body, "Account locked") || strings.Contains(body, "=1+2") ||
		!strings.Contains(body, `href="/admin/events?network=2001%3Adb8%3A7%3A%3A%2F64"`) ||
		!strings.Contains(body, `href="/admin/events.csv?account=ann%40example.com&amp;network=2001%3Adb8%3A7%3A%3A%2F64"`) {
		t.Errorf("page: %d %s", resp.StatusCode, body)
	}
	// The form offers each kind in the words of its rows, its name beside
	// them, and keeps the one searched for.
	_, body = get(t, admin, base+"/admin/events?kind=lockout")
	for _, want := range []string{
		`<option value="login_rejected">Sign-in refused by a limit (login_rejected)</option>`,
		`<option value="lockout" selected>Account locked (lockout)</option>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page's kinds: want %s in %s", want, body)
		}
	}

	// The export.
	resp, body = get(t, admin, base+"/admin/events.csv?kind=login_failed")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment;") {
		t.Fatalf("export: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// Every cell quoted: a spreadsheet that splits on ";" still finds
	// one cell in each.
	if !strings.Contains(body, `,"'=1+2",`) {
		t.Errorf("the export's cells are not all quoted:\n%s", body)
	}
	records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// The ids are the database's: the sign-ins' own events, written as
	// their queue flushes, may come before, between or after these.
	want := [][]string{
		{"id", "time", "kind", "account", "network", "detail"},
		{"ID", t0.Add(2 * time.Second).Format(time.RFC3339), "login_failed", "'=1+2", "192.0.2.7", `{"note":"-x"}`},
		{"ID", t0.Format(time.RFC3339), "login_failed", "ann@example.com", "2001:db8:7::/64", `{}`},
	}
	if len(records) != len(want) {
		t.Fatalf("export: %q, want %q", records, want)
	}
	lastID := int64(math.MaxInt64)
	for i := range want {
		if i > 0 {
			id, err := strconv.ParseInt(records[i][0], 10, 64)
			if err != nil || id >= lastID {
				t.Errorf("export row %d: id %q, want a number below the row before's", i, records[i][0])
			}
			lastID = id
			records[i][0] = "ID"
		}
		if strings.Join(records[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("export row %d: %q, want %q", i, records[i], want[i])
		}
	}
	resp, body = get(t, admin, base+"/admin/events.csv?account="+url.QueryEscape("=cmd|' /C calc'!A0"))
	if resp.StatusCode != http.StatusOK || body != `"id","time","kind","account","network","detail"`+"\n" {
		t.Errorf("empty export: %d %q", resp.StatusCode, body)
	}

	// The API pages with next_cursor.
	var page struct {
		Events []struct {
			ID      int64  `json:"id"`
			Kind    string `json:"kind"`
			Account string `json:"account"`
			Network string `json:"network"`
		} `json:"events"`
		NextCursor string `json:"next_cursor"`
	}
	resp, body = get(t, admin, base+"/api/v1/admin/events?account=%3D1%2B2")
	if err := json.Unmarshal([]byte(body), &page); err != nil || resp.StatusCode != 200 ||
		len(page.Events) != 1 || page.Events[0].Account != "=1+2" || page.Events[0].Network != "192.0.2.7" || page.NextCursor != "" {
		t.Errorf("API: %d %s", resp.StatusCode, body)
	}

	// A prefix finds the events of the addresses and networks inside it,
	// in the API and in the export alike.
	for network, want := range map[string]int{"2001:db8:7::/48": 2, "192.0.2.0/24": 1, "198.51.100.0/24": 0} {
		query := url.Values{"network": {network}}.Encode()
		page.Events = nil
		resp, body = get(t, admin, base+"/api/v1/admin/events?"+query)
		if err := json.Unmarshal([]byte(body), &page); err != nil || resp.StatusCode != 200 || len(page.Events) != want {
			t.Errorf("API network=%s: %d %s, want %d events", network, resp.StatusCode, body, want)
		}
		resp, body = get(t, admin, base+"/admin/events.csv?"+query)
		if resp.StatusCode != 200 || strings.Count(body, "\n") != 1+want {
			t.Errorf("export network=%s: %d %s, want %d events", network, resp.StatusCode, body, want)
		}
	}
}

// TestCSVCellFormulas: a cell that a spreadsheet would run is quoted,
// and so is one that begins with the full-width form of a formula's sign,
// which some imports turn into the sign itself.
func TestCSVCellFormulas(t *testing.T) {
	for in, want := range map[string]string{
		"=1+2": "'=1+2", "+1": "'+1", "-1": "'-1", "@SUM(A1)": "'@SUM(A1)", "\tx": "'\tx", "\rx": "'\rx",
		"\uFF1D1+2": "'\uFF1D1+2", "\uFF0B1": "'\uFF0B1", "\uFF0D1": "'\uFF0D1", "\uFF20SUM(A1)": "'\uFF20SUM(A1)",
		"ann@example.com": "ann@example.com", "": "", "{}": "{}", "x\uFF1D1": "x\uFF1D1", "\uFF21": "\uFF21",
		// Small, superscript and subscript forms, which NFKC makes signs.
		"\uFE66x": "'\uFE66x", "\uFE62x": "'\uFE62x", "\uFE63x": "'\uFE63x", "\uFE6Bx": "'\uFE6Bx",
		"\u207Ax": "'\u207Ax", "\u207Cx": "'\u207Cx", "\u208Ax": "'\u208Ax", "\u208Cx": "'\u208Cx",
		"\u00E9x": "\u00E9x", "\u2460": "\u2460",
	} {
		if got := web.CSVCell(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestCredentialEventsInWords: the accounts and API keys made and
// revoked are found by their kinds and said in words: an account's page
// and the search say who made it and with what role, the search names an
// API key's application and id and who made or revoked it, never the key.
func TestCredentialEventsInWords(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	root := env.AddUser(t, adminEmail, anyPassword, true)
	member, err := env.Service.CreateUser(t.Context(), memberEmail, anyPassword, false, "admin:"+adminEmail)
	if err != nil {
		t.Fatal(err)
	}
	key, info, err := env.Service.AddAPIKey(t.Context(), "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Service.RevokeAPIKey(t.Context(), "shop", "admin:"+adminEmail); err != nil {
		t.Fatal(err)
	}
	env.Flush(t)
	admin := xcloaktest.Client(t, "127.0.31.4")
	signIn(t, admin, base, adminEmail, anyPassword)

	for _, tc := range []struct {
		path string
		want []string
	}{
		{fmt.Sprintf("/admin/users/%d", root.ID), []string{"Administrator account created", "From the command line"}},
		{fmt.Sprintf("/admin/users/%d", member.ID), []string{"Account created", "By administrator " + adminEmail}},
		{"/admin/events?kind=user_created", []string{"Administrator account created", "From the command line",
			"Account created", "By administrator " + adminEmail}},
		{"/admin/events?kind=api_key_created", []string{"API key created",
			fmt.Sprintf("Application shop, key %d, from the command line", info.ID)}},
		{"/admin/events?kind=api_key_revoked", []string{"API key revoked",
			fmt.Sprintf("Application shop, key %d, by administrator %s", info.ID, adminEmail)}},
	} {
		resp, body := get(t, admin, base+tc.path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", tc.path, resp.StatusCode)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s does not say %q", tc.path, w)
			}
		}
		if strings.Contains(body, key[4:12]) {
			t.Errorf("%s shows part of the key", tc.path)
		}
	}
}

// TestEventExportHoldsNoConnection: an export read slowly holds no
// Postgres connection while it waits on its reader, so that a few of
// them cannot take the pool from every sign-in; read to its end, it has
// every row once, newest first, across the pages it was read in, and is
// recorded as an events_exported event naming who took it.
func TestEventExportHoldsNoConnection(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	const rows = 30_000
	insertFailedSignIns(t, env, rows)
	admin := xcloaktest.Client(t, "127.0.78.1")
	signIn(t, admin, base, adminEmail, anyPassword)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	cookies := cookieHeader(admin, u)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := conn.Write([]byte("GET /admin/events.csv?kind=login_failed HTTP/1.1\r\nHost: " + u.Host + "\r\nCookie: " + cookies + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReaderSize(conn, 4096).ReadString('\n'); err != nil || !strings.Contains(line, " 200 ") {
		t.Fatalf("export: %q, %v", line, err)
	}
	// The reader stops; the server fills the socket and waits.
	deadline := time.Now().Add(5 * time.Second)
	for env.DB.Stat().AcquiredConns() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("an export waiting on its reader holds %d Postgres connections", env.DB.Stat().AcquiredConns())
		}
		time.Sleep(50 * time.Millisecond)
	}
	conn.Close()

	resp, body := get(t, admin, base+"/admin/events.csv?kind=login_failed")
	lines, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("export: %d, %v", resp.StatusCode, err)
	}
	if len(lines) != rows+1 {
		t.Fatalf("%d lines, want the header and %d rows", len(lines), rows)
	}
	for i, l := range lines[1:] {
		if want := fmt.Sprintf("user%d@example.com", i+1); l[3] != want {
			t.Fatalf("row %d is %s, want %s", i+1, l[3], want)
		}
	}

	// Each export is an event: who took how many, with its filters.
	env.Flush(t)
	var detail string
	if err := env.DB.QueryRow(t.Context(), `SELECT detail::text FROM security_events
		WHERE kind = 'events_exported' AND detail->>'rows' = $1`, fmt.Sprint(rows)).Scan(&detail); err != nil {
		t.Fatalf("the whole export's event: %v", err)
	}
	if want := `{"by": "admin:root@example.com", "kind": "login_failed", "rows": "30000"}`; detail != want {
		t.Errorf("its detail: %s, want %s", detail, want)
	}
}

// TestEventExportOutlivesWriteTimeout: an export longer than the server's
// bound on an ordinary answer (http.Server.WriteTimeout) reaches a reader
// who keeps reading whole, not cut off at that bound.
func TestEventExportOutlivesWriteTimeout(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	srv := web.NewHTTPServer(env.Handler, nil)
	// The served bound, shortened so that the test need not outlast it.
	srv.WriteTimeout = 300 * time.Millisecond
	ts := httptest.NewUnstartedServer(env.Handler)
	ts.Config = srv
	ts.Listener = smallSendBuffers{ts.Listener}
	ts.Start()
	t.Cleanup(ts.Close)
	env.AddUser(t, adminEmail, anyPassword, true)
	const rows = 20_000
	insertFailedSignIns(t, env, rows)
	admin := xcloaktest.Client(t, "127.0.78.2")
	// Signed in through a server without the shortened bound: a sign-in
	// (a password's hash) on a loaded machine may take longer than it.
	// The cookies are the host's, whichever port set them.
	signIn(t, admin, env.Start(t), adminEmail, anyPassword)
	u, err := url.Parse(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	cookies := cookieHeader(admin, u)
	if cookies == "" {
		t.Fatal("no cookies for the export's server")
	}
	// A reader with a small window (and a server with a small send
	// buffer), so that the server's writes wait on it rather than fill
	// the kernel's buffers at once: the file takes longer than the bound
	// to read, as a large export over a slow link does.
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(32 << 10)
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/admin/events.csv?kind=login_failed", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", cookies)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("export: %v, %v", resp, err)
	}
	defer resp.Body.Close()
	// Read at a pace that makes the whole take several times the bound:
	// the server cannot run ahead by more than the buffers hold.
	start := time.Now()
	var body strings.Builder
	buf := make([]byte, 4<<10)
	for {
		n, err := resp.Body.Read(buf)
		before := body.Len()
		body.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %v and %d bytes: %v", time.Since(start), body.Len(), err)
		}
		if before/(64<<10) != body.Len()/(64<<10) {
			time.Sleep(25 * time.Millisecond)
		}
	}
	lines, err := csv.NewReader(strings.NewReader(body.String())).ReadAll()
	if err != nil || len(lines) != rows+1 {
		t.Fatalf("%d lines (%v) in %v, want the header and %d rows", len(lines), err, time.Since(start), rows)
	}
}

// smallSendBuffers gives every connection it accepts a small send buffer,
// as a slow link's would be full, so that a server's writes wait on its
// reader rather than fill the kernel's buffers at once.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(32 << 10)
	}
	return c, err
}

// TestEventExportHeadReadsNothing: HEAD of the export, which gets the
// headers alone, reads no event and records no export: net/http discards
// a HEAD's body, so the events it read were sent to no one, and its
// events_exported named an administrator as taking rows they never got.
func TestEventExportHeadReadsNothing(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	insertFailedSignIns(t, env, 10)
	admin := xcloaktest.Client(t, "127.0.78.3")
	signIn(t, admin, base, adminEmail, anyPassword)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodHead, base+"/admin/events.csv?kind=login_failed", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := do(t, admin, req)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("HEAD of the export: %d %s, want 200 text/csv", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	env.Flush(t)
	var n int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM security_events WHERE kind = 'events_exported'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("HEAD of the export recorded %d exports, want none", n)
	}
}

// TestEventExportReaderGoneIsNoError: an export whose reader went away
// (a download cancelled) ends quietly, as one whose write failed does:
// the next page's read, cut short by the request's cancellation, was
// logged as the service's failure, twice at ERROR.
func TestEventExportReaderGoneIsNoError(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	insertFailedSignIns(t, env, 3000)
	admin := xcloaktest.Client(t, "127.0.78.4")
	signIn(t, admin, base, adminEmail, anyPassword)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuf
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, base+"/admin/events.csv", nil)
	req.RemoteAddr = "127.0.78.4:5000"
	for _, c := range admin.Jar.Cookies(u) {
		req.AddCookie(c)
	}
	// The reader goes away once the first page is in the connection's
	// buffers, as they take it: the next page is read for no one.
	w := &goneAfterFirstPage{ResponseRecorder: httptest.NewRecorder(), gone: cancel}
	func() {
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				panic(v)
			}
		}()
		h.ServeHTTP(w, req)
	}()
	if w.Code != http.StatusOK {
		t.Fatalf("export: %d", w.Code)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("an ERROR line for an export whose reader went away:\n%s", logs.String())
	}
}

// goneAfterFirstPage takes writes as a connection's buffers do, and ends
// the request's context once a page of an export has been written, as
// net/http does when the client hangs up.
type goneAfterFirstPage struct {
	*httptest.ResponseRecorder
	gone    context.CancelFunc
	written int
}

func (w *goneAfterFirstPage) Write(b []byte) (int, error) {
	if w.written += len(b); w.written > 64<<10 {
		w.gone()
	}
	return w.ResponseRecorder.Write(b)
}

// insertFailedSignIns writes n login_failed events, a second apart and
// each for an account of its own, straight into the table: enough rows
// for an export of many pages without n sign-ins.
func insertFailedSignIns(t *testing.T, env *xcloaktest.Env, n int) {
	t.Helper()
	if _, err := env.DB.Exec(t.Context(), `INSERT INTO security_events (at, kind, account_key, ip, detail)
		SELECT now() - make_interval(secs => g), 'login_failed', 'user' || g || '@example.com', '192.0.2.' || (g % 250),
		       jsonb_build_object('note', repeat('x', 40))
		FROM generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
}

// cookieHeader is the Cookie header c's jar sends to u, for a request
// written by hand on a raw connection.
func cookieHeader(c *http.Client, u *url.URL) string {
	var cookies []string
	for _, ck := range c.Jar.Cookies(u) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	return strings.Join(cookies, "; ")
}

// TestEventSearchByATranslatedAddress: with the operator's translator in
// XCLOAK_NAT64_PREFIXES, an address under it, as the application or the
// translator's own log names the client, finds the events of the IPv4
// address it embeds, which the events record, as under 64:ff9b::/96.
func TestEventSearchByATranslatedAddress(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{Web: func(c *web.Config) {
		c.NAT64Prefixes = []netip.Prefix{netip.MustParsePrefix("2001:db8:122::/48")}
	}})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.31.4")
	signIn(t, admin, base, adminEmail, anyPassword)
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	if err := postgres.New(env.DB).InsertEvents(t.Context(), auth.NewEventBatchID(), []auth.Event{
		{At: t0, Kind: auth.EventLoginFailed, Account: "app shop ann", Source: "192.0.2.33"},
	}); err != nil {
		t.Fatal(err)
	}
	// 192.0.2.33 under the /48 (RFC 6052's example).
	for _, network := range []string{"2001:db8:122:c000:2:2100::", "64:ff9b::192.0.2.33", "192.0.2.33"} {
		resp, body := get(t, admin, base+"/api/v1/admin/events?"+url.Values{"network": {network}}.Encode())
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"app shop ann"`) {
			t.Errorf("network=%s: %d %s, want the event of 192.0.2.33", network, resp.StatusCode, body)
		}
	}
}
