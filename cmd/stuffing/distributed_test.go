package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// A small run: every role present, every count checkable by hand.
const (
	distAccounts  = 40
	distLeaked    = 4
	distUnknown   = 20
	distReturning = 3
	distNewDevice = 2
)

// distArgs is the command line of a small run against url.
func distArgs(url, databaseURL string, extra ...string) []string {
	return append([]string{"distributed", "--json", "--target", url, "--database-url", databaseURL,
		"--accounts", fmt.Sprint(distAccounts), "--leaked", fmt.Sprint(distLeaked), "--unknown", fmt.Sprint(distUnknown),
		"--returning", fmt.Sprint(distReturning), "--new-device", fmt.Sprint(distNewDevice),
		"--per-address", "2", "--per-network", "2", "--rate", "0", "--workers", "2",
		"--poll", "100ms", "--tail", "0s", "--duration", "2m"}, extra...)
}

func runDistributed(t *testing.T, args []string) (distReport, map[string]any) {
	t.Helper()
	stdout, stderr, err := runStuffing(t, args...)
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, stderr)
	}
	var rep distReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, stdout)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(stdout), &raw)
	return rep, raw
}

// checkCounts checks what holds whatever the server does: the list is
// sent whole, every answer is counted once, the leaked and unknown entries'
// answers are their share of it, and the accounts are gone afterwards.
func checkCounts(t *testing.T, rep distReport, env *xcloaktest.Env) {
	t.Helper()
	const n = distAccounts + distUnknown
	if rep.Sent != n || rep.StoppedBy != "end of list" {
		t.Errorf("sent %d, stopped by %s; want the whole list (%d), end of list", rep.Sent, rep.StoppedBy, n)
	}
	if got := rep.Statuses.total(); got != rep.Sent {
		t.Errorf("answers by status add up to %d (%s), want %d sent", got, rep.Statuses, rep.Sent)
	}
	if got := rep.LeakedStatuses.total(); got != distLeaked {
		t.Errorf("leaked entries' answers %d (%s), want %d", got, rep.LeakedStatuses, distLeaked)
	}
	if got := rep.UnknownStatuses.total(); got != distUnknown {
		t.Errorf("unknown entries' answers %d (%s), want %d", got, rep.UnknownStatuses, distUnknown)
	}
	if rep.Statuses.Errors != 0 || rep.Statuses.Other != 0 || rep.Statuses.Unavailable != 0 || rep.OKWithoutSession != 0 || rep.HeldWithoutMessage != 0 {
		t.Errorf("%s, %d 200s without a session, %d bad 202s (first error %q); want none",
			rep.Statuses, rep.OKWithoutSession, rep.HeldWithoutMessage, rep.FirstError)
	}
	// Each leaked password is tried once, so it signs in, is held, or is refused.
	if got := rep.SignedInLeaked + rep.LeakedHeld + rep.LeakedStatuses.Unauthorized + rep.LeakedStatuses.Limited; got != distLeaked {
		t.Errorf("signed in %d + held %d + refused = %d, want %d leaked", rep.SignedInLeaked, rep.LeakedHeld, got, distLeaked)
	}
	// And each that signed in had its session checked once, which either
	// still worked or was ended.
	if rep.SessionChecksFailed != 0 || rep.Takeovers+rep.SessionsEnded != rep.SignedInLeaked {
		t.Errorf("signed in %d: takeovers %d, sessions ended %d, checks failed %d (first %q); want the two adding up to it",
			rep.SignedInLeaked, rep.Takeovers, rep.SessionsEnded, rep.SessionChecksFailed, rep.FirstCheckError)
	}
	if rep.Addresses != n/2 || rep.Networks != n/4 {
		t.Errorf("%d addresses in %d /24s, want %d in %d", rep.Addresses, rep.Networks, n/2, n/4)
	}
	r := rep.Returning
	if r.Users != distReturning || r.Attempts != distReturning || r.SignedIn != distReturning {
		t.Errorf("returning users %+v, want all %d signed in with their device cookie", r, distReturning)
	}
	if r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
		t.Errorf("returning users p50 %vms p99 %vms, want 0 < p50 <= p99", r.P50Ms, r.P99Ms)
	}
	if nd := rep.NewDevice; nd.Users != distNewDevice || nd.Attempts != distNewDevice || nd.Statuses.OK+nd.Statuses.Held != distNewDevice {
		t.Errorf("new-device users %+v, want each answered 200 or 202", nd)
	}
	if rep.AttackMode.Polls < 2 || rep.AttackMode.PollErrors != 0 {
		t.Errorf("admin read the stats %d times, %d failed (%s); want reads that succeed",
			rep.AttackMode.Polls, rep.AttackMode.PollErrors, rep.AttackMode.FirstPollError)
	}
	var left int
	if err := env.DB.QueryRow(t.Context(), `SELECT count(*) FROM users WHERE email LIKE $1`, rep.Tag+"-%").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d of the run's accounts left in the database, want none", left)
	}
}

// TestDistributedTakesOverToday runs the attack, small, against
// XCloak as it is without attack mode: every leaked password signs in.
func TestDistributedTakesOverToday(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	url := env.Start(t)
	rep, raw := runDistributed(t, distArgs(url, env.DatabaseURL))
	checkCounts(t, rep, env)
	// Attack mode never coming on, nothing holds a right password.
	if m := rep.AttackMode; !m.Reported || m.SeenAfterSeconds == nil {
		if rep.SignedInLeaked != distLeaked {
			t.Errorf("leaked signed in %d, want all %d leaked accounts (attack mode never on); leaked answers %s",
				rep.SignedInLeaked, distLeaked, rep.LeakedStatuses)
		}
		if rep.NewDevice.SignedIn != distNewDevice {
			t.Errorf("new-device users %+v, want all signed in", rep.NewDevice)
		}
	}
	// Nothing ends a session today: every one that signed in is kept.
	if rep.Takeovers != rep.SignedInLeaked || rep.SessionsEnded != 0 {
		t.Errorf("takeovers %d of %d signed in, %d sessions ended; want all kept, none ended",
			rep.Takeovers, rep.SignedInLeaked, rep.SessionsEnded)
	}
	for _, key := range []string{"attempts_sent", "statuses", "signed_in_leaked", "takeovers", "sessions_ended", "session_checks_failed",
		"leaked_held", "attack_mode", "returning_users", "new_device_users"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("report lacks %q", key)
		}
	}
	statuses, _ := raw["statuses"].(map[string]any)
	for _, key := range []string{"200", "202", "401", "429", "503", "other", "transport_errors"} {
		if _, ok := statuses[key]; !ok {
			t.Errorf("report's statuses lack %q: %v", key, statuses)
		}
	}
	mode, _ := raw["attack_mode"].(map[string]any)
	for _, key := range []string{"reported", "seen_after_seconds", "since", "since_after_seconds", "trigger", "active_at_end"} {
		if _, ok := mode[key]; !ok {
			t.Errorf("report's attack_mode lacks %q: %v", key, mode)
		}
	}
}

// attackModeStandIn wraps a real XCloak with the contract of attack mode
// and new-device verification, for the simulator's side of it: from the
// onAfter-th sign-in on, attack mode is on, the stats say so, and a
// sign-in without cookies that would have got 200 or 401 gets 202
// verification_required instead, with no cookie. With signOut, attack
// mode also ends the sessions that the attack's addresses got from
// sign-ins without cookies before it came on: GET /account with one
// redirects to /login.
type attackModeStandIn struct {
	next    http.Handler
	onAfter int
	signOut bool

	mu      sync.Mutex
	signIns int
	since   time.Time
	// early are the session cookies of those sign-ins.
	early map[string]bool
}

// sessionValue is the value of the session cookie among cookies, or "".
func sessionValue(cookies []*http.Cookie) string {
	for _, c := range cookies {
		if c.Name == sessionCookie || c.Name == "__Host-"+sessionCookie {
			return c.Value
		}
	}
	return ""
}

// fromAttack reports whether r comes from the attack's addresses rather
// than a user's or the admin's.
func fromAttack(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Is4() && ap.Addr().As4()[1] < distUserOctet
}

// ended is how many sessions attack mode has ended.
func (s *attackModeStandIn) ended() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return 0
	}
	return len(s.early)
}

func (s *attackModeStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case loginPath:
		s.mu.Lock()
		s.signIns++
		if s.signIns == s.onAfter {
			s.since = time.Now()
		}
		on := !s.since.IsZero()
		s.mu.Unlock()
		if r.Header.Get("Cookie") != "" {
			s.next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		s.next.ServeHTTP(rec, r)
		if !on && s.signOut && rec.Code == http.StatusOK && fromAttack(r) {
			if v := sessionValue(rec.Result().Cookies()); v != "" {
				s.mu.Lock()
				if s.early == nil {
					s.early = map[string]bool{}
				}
				s.early[v] = true
				s.mu.Unlock()
			}
		}
		if on && (rec.Code == http.StatusOK || rec.Code == http.StatusUnauthorized) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"status":"verification_required"}` + "\n"))
			return
		}
		copyRecorded(w, rec, rec.Body.Bytes())
	case statsPath:
		rec := httptest.NewRecorder()
		s.next.ServeHTTP(rec, r)
		var body map[string]any
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
			copyRecorded(w, rec, rec.Body.Bytes())
			return
		}
		s.mu.Lock()
		attack := map[string]any{"active": false, "since": nil, "trigger": nil}
		if !s.since.IsZero() {
			attack = map[string]any{"active": true, "since": s.since.UTC().Format(time.RFC3339Nano), "trigger": "automatic"}
		}
		s.mu.Unlock()
		body["attack"] = attack
		b, _ := json.Marshal(body)
		copyRecorded(w, rec, b)
	case accountPath:
		s.mu.Lock()
		ended := !s.since.IsZero() && s.early[sessionValue(r.Cookies())]
		s.mu.Unlock()
		if ended {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		s.next.ServeHTTP(w, r)
	default:
		s.next.ServeHTTP(w, r)
	}
}

func copyRecorded(w http.ResponseWriter, rec *httptest.ResponseRecorder, body []byte) {
	for k, v := range rec.Header() {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

// TestDistributedAgainstAttackMode runs the same attack at a server that
// holds new browsers once attack mode is on, and then signs out those that
// signed in just before: what it holds is counted as held, what it signs
// out as ended, neither as taken over, and the report says when attack
// mode came on.
func TestDistributedAgainstAttackMode(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	// 1 admin and 3 returning users sign in before the attack.
	standIn := &attackModeStandIn{next: env.Handler, onAfter: 1 + distReturning + 10, signOut: true}
	srv := httptest.NewServer(standIn)
	t.Cleanup(srv.Close)
	rep, _ := runDistributed(t, distArgs(srv.URL, env.DatabaseURL))
	checkCounts(t, rep, env)

	m := rep.AttackMode
	if !m.Reported || m.ActiveBefore || m.SeenAfterSeconds == nil || m.SinceAfterSeconds == nil || !m.ActiveAtEnd {
		t.Fatalf("attack mode %+v, want reported, off before, seen on during the attack, on at the end", m)
	}
	if *m.SinceAfterSeconds < 0 || *m.SinceAfterSeconds > *m.SeenAfterSeconds {
		t.Errorf("since %.3fs, seen %.3fs after the attack's start; want 0 <= since <= seen", *m.SinceAfterSeconds, *m.SeenAfterSeconds)
	}
	if m.Trigger == nil || *m.Trigger != "automatic" {
		t.Errorf("trigger %v, want automatic", m.Trigger)
	}
	// The seed puts leaked entries past the tenth attempt: some are held.
	if rep.LeakedHeld == 0 || rep.SignedInLeaked+rep.LeakedHeld != distLeaked {
		t.Errorf("leaked signed in %d, held %d; want some held and the two adding up to %d", rep.SignedInLeaked, rep.LeakedHeld, distLeaked)
	}
	// It puts one before: it signs in, then attack mode signs it out.
	if ended := standIn.ended(); ended == 0 || rep.SessionsEnded != int64(ended) || rep.Takeovers != rep.SignedInLeaked-int64(ended) {
		t.Errorf("leaked signed in %d, takeovers %d, sessions ended %d; want the %d the server ended counted as ended, not taken over",
			rep.SignedInLeaked, rep.Takeovers, rep.SessionsEnded, ended)
	}
	if rep.Statuses.Held == 0 {
		t.Errorf("no 202 among %s", rep.Statuses)
	}
	if rep.NewDevice.Statuses.Held == 0 || rep.NewDevice.SignedIn+int(rep.NewDevice.Statuses.Held) != distNewDevice {
		t.Errorf("new-device users %+v, want held once attack mode is on", rep.NewDevice)
	}
}

// TestDistributedWarmUpHeld refuses to run when the server holds the
// returning users' first sign-in: they could not be returning users.
func TestDistributedWarmUpHeld(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	srv := httptest.NewServer(&attackModeStandIn{next: env.Handler, onAfter: 1})
	t.Cleanup(srv.Close)
	_, stderr, err := runStuffing(t, distArgs(srv.URL, env.DatabaseURL)...)
	if err == nil || !strings.Contains(stderr, "answered 202") {
		t.Fatalf("got %v, stderr %q; want a refusal naming the 202", err, stderr)
	}
}

func TestDistributedPlan(t *testing.T) {
	c := distConfig{accounts: 100, leaked: 7, unknown: 30, returning: 5, newDevice: 4, tag: "t1", seed: 3}
	p := newPlan(c)
	if len(p.list) != 130 {
		t.Fatalf("list of %d, want 130", len(p.list))
	}
	roles := map[role]int{}
	emails, wrong := map[string]bool{}, map[string]bool{}
	for i, e := range p.list {
		roles[e.role]++
		emails[e.email] = true
		var n int
		if _, err := fmt.Sscanf(e.email, "t1-%d@example.com", &n); err != nil {
			t.Fatalf("entry %d: email %q", i, e.email)
		}
		switch {
		case e.role == roleUnknown && n < c.accounts, e.role != roleUnknown && n >= c.accounts:
			t.Errorf("entry %d: %s is %v", i, e.email, e.role)
		case e.role == roleLeaked && e.password != p.passwords[n]:
			t.Errorf("leaked entry %s: password %q, want the account's %q", e.email, e.password, p.passwords[n])
		case e.role != roleLeaked:
			if n < c.accounts && e.password == p.passwords[n] {
				t.Errorf("entry %s holds the account's real password", e.email)
			}
			wrong[e.password] = true
		}
	}
	if roles[roleLeaked] != 7 || roles[roleUnknown] != 30 || len(emails) != 130 {
		t.Errorf("roles %v, %d distinct emails; want 7 leaked, 30 unknown, 130 emails", roles, len(emails))
	}
	if len(wrong) != 130-7 {
		t.Errorf("%d distinct wrong passwords, want %d: none may be sprayed", len(wrong), 130-7)
	}
	users := map[int]bool{}
	for _, a := range append(append([]int{}, p.returning...), p.newDevice...) {
		if users[a] || strings.HasPrefix(p.passwords[a], "leaked-") {
			t.Errorf("account %d is a user twice, or leaked", a)
		}
		users[a] = true
	}
	if len(p.returning) != 5 || len(p.newDevice) != 4 {
		t.Errorf("%d returning, %d new-device users; want 5 and 4", len(p.returning), len(p.newDevice))
	}
	// The same seed gives the same run, a plan being the run's whole script.
	q := newPlan(c)
	for i := range p.list {
		if p.list[i].email != q.list[i].email {
			t.Fatalf("entry %d: %s then %s with the same seed", i, p.list[i].email, q.list[i].email)
		}
	}
}

func TestAttemptSource(t *testing.T) {
	c := distConfig{perAddress: 2, perNetwork: 3}
	tests := []struct {
		k    int
		want string
	}{
		{0, "127.10.0.1"},
		{1, "127.10.0.1"}, // the address's second attempt
		{2, "127.10.0.2"},
		{5, "127.10.0.3"},
		{6, "127.10.1.1"}, // the next /24
		{6 * 256, "127.11.0.1"},
	}
	for _, tt := range tests {
		if got := c.attemptSource(tt.k); got != netip.MustParseAddr(tt.want) {
			t.Errorf("attemptSource(%d) = %s, want %s", tt.k, got, tt.want)
		}
	}
	// The last /24 a run may use lies below the users' addresses.
	one := distConfig{perAddress: 1, perNetwork: 1}
	last := one.attemptSource(maxDistNetworks - 1)
	if !last.IsLoopback() || last.As4()[1] != distUserOctet-1 {
		t.Errorf("last attack address %s, want 127.%d.255.1", last, distUserOctet-1)
	}
	if a := userSource(groupAdmin, 0); a != netip.MustParseAddr("127.202.0.1") {
		t.Errorf("admin comes from %s, want 127.202.0.1", a)
	}
}

func TestDistributedPrint(t *testing.T) {
	seen, since, trigger := 4.25, 3.9, "automatic"
	r := &distReport{Target: "http://127.0.0.1:1", Accounts: 10, Leaked: 3, Sent: 10, SignedInLeaked: 2, Takeovers: 1, SessionsEnded: 1, LeakedHeld: 1,
		AttackMode: attackModeReport{Reported: true, SeenAfterSeconds: &seen, SinceAfterSeconds: &since, Trigger: &trigger, ActiveAtEnd: true}}
	var b bytes.Buffer
	r.print(&b)
	for _, want := range []string{"leaked signed in    2 of 3 leaked accounts", "takeovers           1 of 3 leaked accounts",
		"sessions ended 1", "leaked held (202)   1",
		"on, seen 4.2s after the attack's first request (since +3.9s, automatic)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	r.AttackMode = attackModeReport{}
	b.Reset()
	r.print(&b)
	if !strings.Contains(b.String(), "attack mode         not reported") {
		t.Errorf("report of a server without attack mode:\n%s", b.String())
	}
}
