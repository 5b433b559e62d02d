package authtest

import (
	"errors"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// sessionWith stores a session of u under the hash of token, with the
// details the account's list shows.
func sessionWith(t *testing.T, s auth.Store, u auth.User, token, network, browser string, at time.Time) auth.Session {
	t.Helper()
	sess := auth.Session{UserID: u.ID, CreatedAt: at, ExpiresAt: at.Add(time.Hour), PublicID: auth.NewPublicID(),
		Network: network, Browser: browser}
	mustNil(t, s.CreateSession(t.Context(), hash(token), sess, u.PasswordHash, u.SignOuts))
	return sess
}

// sessionListCases are the cases of the account's own list of sessions
// and devices.
var sessionListCases = []struct {
	name string
	run  func(t *testing.T, s auth.Store)
}{
	{"a session keeps its public id, network and browser", func(t *testing.T, s auth.Store) {
		ann := mustUser(t, s, "ann@example.com")
		want := sessionWith(t, s, ann, "ann 1", "192.0.2.1", "Firefox on Linux", base)
		got, err := s.SessionByHash(t.Context(), hash("ann 1"), base)
		mustNil(t, err)
		if got.PublicID != want.PublicID || got.Network != "192.0.2.1" || got.Browser != "Firefox on Linux" || !got.LastSeenAt.Equal(base) {
			t.Errorf("SessionByHash = %+v; want public id %s, its network and browser, last seen at creation %v", got, want.PublicID, base)
		}
	}},
	{"an account lists its own live sessions, most recently used first", func(t *testing.T, s auth.Store) {
		ann, bob := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com")
		old := sessionWith(t, s, ann, "ann 1", "192.0.2.1", "Firefox on Linux", base.Add(-2*time.Hour)) // expired
		first := sessionWith(t, s, ann, "ann 2", "192.0.2.2", "Chrome on Android", base)
		second := sessionWith(t, s, ann, "ann 3", "2001:db8::/64", "Safari on iPhone", base.Add(time.Second))
		sessionWith(t, s, bob, "bob 1", "192.0.2.9", "Edge on Windows", base)
		mustNil(t, s.TouchSession(t.Context(), hash("ann 2"), base.Add(2*time.Minute), time.Minute, time.Time{}))

		got, err := s.AccountSessions(t.Context(), ann.ID, base.Add(time.Minute), 10)
		mustNil(t, err)
		if len(got) != 2 || got[0].PublicID != first.PublicID || got[1].PublicID != second.PublicID {
			t.Fatalf("AccountSessions = %+v; want ann's two live ones, the touched %s first, not the expired %s nor bob's",
				got, first.PublicID, old.PublicID)
		}
		if g := got[0]; !g.LastSeenAt.Equal(base.Add(2*time.Minute)) || !g.CreatedAt.Equal(base) || g.Network != "192.0.2.2" || g.Browser != "Chrome on Android" {
			t.Errorf("listed session %+v; want created %v, last seen %v, its network and browser", g, base, base.Add(2*time.Minute))
		}
		if got, _ := s.AccountSessions(t.Context(), ann.ID, base.Add(time.Minute), 1); len(got) != 1 {
			t.Errorf("AccountSessions with limit 1 listed %d", len(got))
		}
	}},
	{"a session's last use is written at most once per gap", func(t *testing.T, s auth.Store) {
		ann := mustUser(t, s, "ann@example.com")
		sessionWith(t, s, ann, "ann 1", "192.0.2.1", "curl", base)
		lastSeen := func() time.Time {
			got, err := s.SessionByHash(t.Context(), hash("ann 1"), base)
			mustNil(t, err)
			return got.LastSeenAt
		}
		for _, step := range []struct {
			at, want time.Duration
		}{
			{30 * time.Second, 0},           // within the gap of creation: not written
			{time.Minute, time.Minute},      // a whole gap later: written
			{90 * time.Second, time.Minute}, // within the gap of that write
			{130 * time.Second, 130 * time.Second},
		} {
			mustNil(t, s.TouchSession(t.Context(), hash("ann 1"), base.Add(step.at), time.Minute, time.Time{}))
			if got := lastSeen(); !got.Equal(base.Add(step.want)) {
				t.Errorf("touched at +%v: last seen %v, want +%v", step.at, got.Sub(base), step.want)
			}
		}
	}},
	{"a touch moves the expiry to its idle end, never past the session's end", func(t *testing.T, s auth.Store) {
		ann := mustUser(t, s, "ann@example.com")
		end := base.Add(time.Hour)
		mustNil(t, s.CreateSession(t.Context(), hash("ann 1"), auth.Session{UserID: ann.ID, CreatedAt: base,
			ExpiresAt: base.Add(10 * time.Minute), EndsAt: end}, ann.PasswordHash, ann.SignOuts))
		read := func(at time.Time) (auth.Session, error) {
			return s.SessionByHash(t.Context(), hash("ann 1"), at)
		}
		got, err := read(base)
		mustNil(t, err)
		if !got.ExpiresAt.Equal(base.Add(10*time.Minute)) || !got.EndsAt.Equal(end) {
			t.Fatalf("created: expires %v, ends %v; want +10m, +1h", got.ExpiresAt.Sub(base), got.EndsAt.Sub(base))
		}
		for _, step := range []struct {
			at, idleEnd, want time.Duration // from base; idleEnd 0: none
		}{
			{5 * time.Minute, 15 * time.Minute, 15 * time.Minute},
			{5*time.Minute + 30*time.Second, 20 * time.Minute, 15 * time.Minute}, // within the gap: not written
			{14 * time.Minute, 2 * time.Hour, time.Hour},                         // never past its end
			{16 * time.Minute, 26 * time.Minute, 26 * time.Minute},               // moved back from the end
			{20 * time.Minute, 0, time.Hour},                                     // no idle end: its end
		} {
			var idleEnd time.Time
			if step.idleEnd != 0 {
				idleEnd = base.Add(step.idleEnd)
			}
			mustNil(t, s.TouchSession(t.Context(), hash("ann 1"), base.Add(step.at), time.Minute, idleEnd))
			got, err := read(base.Add(step.at))
			mustNil(t, err)
			if !got.ExpiresAt.Equal(base.Add(step.want)) || !got.EndsAt.Equal(end) {
				t.Errorf("touched at +%v: expires +%v, ends +%v; want +%v, +1h", step.at, got.ExpiresAt.Sub(base), got.EndsAt.Sub(base), step.want)
			}
		}
		mustNil(t, s.TouchSession(t.Context(), hash("ann 1"), base.Add(22*time.Minute), time.Minute, base.Add(30*time.Minute)))
		mustNil(t, s.TouchSession(t.Context(), hash("ann 1"), base.Add(31*time.Minute), time.Minute, base.Add(50*time.Minute)))
		if _, err := read(base.Add(31 * time.Minute)); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("a session touched after its idle end: %v, want ErrNoSession (an expired session is not revived)", err)
		}
	}},
	{"an account ends only its own sessions by public id", func(t *testing.T, s auth.Store) {
		ann, bob := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com")
		a := sessionWith(t, s, ann, "ann 1", "192.0.2.1", "curl", base)
		sessionWith(t, s, ann, "ann 2", "192.0.2.1", "curl", base)
		b := sessionWith(t, s, bob, "bob 1", "192.0.2.2", "curl", base)
		by := hash("ann 2")
		if err := s.EndSession(t.Context(), ann.ID, by, b.PublicID); !errors.Is(err, auth.ErrNotListed) {
			t.Errorf("ann ending bob's session: %v, want ErrNotListed", err)
		}
		if err := s.EndSession(t.Context(), ann.ID, by, auth.NewPublicID()); !errors.Is(err, auth.ErrNotListed) {
			t.Errorf("ending an unknown session: %v, want ErrNotListed", err)
		}
		if _, err := s.SessionByHash(t.Context(), hash("bob 1"), base); err != nil {
			t.Errorf("bob's session after ann tried to end it: %v", err)
		}
		mustNil(t, s.EndSession(t.Context(), ann.ID, by, a.PublicID))
		if _, err := s.SessionByHash(t.Context(), hash("ann 1"), base); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("ann's ended session: %v, want ErrNoSession", err)
		}
		if err := s.EndSession(t.Context(), ann.ID, by, a.PublicID); !errors.Is(err, auth.ErrNotListed) {
			t.Errorf("ending it again: %v, want ErrNotListed", err)
		}
		// Asked with bob's session, or with one that ended.
		if err := s.EndSession(t.Context(), ann.ID, hash("bob 1"), auth.NewPublicID()); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("ann's session ended asked by bob's: %v, want ErrNoSession", err)
		}
	}},
	{"a session that ended ends and forgets nothing", func(t *testing.T, s auth.Store) {
		ann := mustUser(t, s, "ann@example.com")
		mustNil(t, s.AddDevice(t.Context(), ann.ID, ann.PasswordHash, ann.SignOuts, hash("ann d1"), base, 10, false))
		ann, err := s.UserByEmail(t.Context(), "ann@example.com")
		mustNil(t, err)
		mine := sessionWith(t, s, ann, "ann 1", "192.0.2.1", "curl", base)
		sessionWith(t, s, ann, "ann 2", "192.0.2.66", "curl", base)
		devices, err := s.AccountDevices(t.Context(), ann.ID, 10)
		mustNil(t, err)
		mustNil(t, s.DeleteSession(t.Context(), hash("ann 2")))
		gone := hash("ann 2")
		if err := s.EndSession(t.Context(), ann.ID, gone, mine.PublicID); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("EndSession asked by an ended session: %v, want ErrNoSession", err)
		}
		if n, err := s.EndOtherSessions(t.Context(), ann.ID, gone); !errors.Is(err, auth.ErrNoSession) || n != 0 {
			t.Errorf("EndOtherSessions asked by an ended session: %d, %v; want ErrNoSession", n, err)
		}
		if err := s.ForgetDevice(t.Context(), ann.ID, gone, devices[0].PublicID); !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("ForgetDevice asked by an ended session: %v, want ErrNoSession", err)
		}
		if _, err := s.SessionByHash(t.Context(), hash("ann 1"), base); err != nil {
			t.Errorf("the live session after the ended one's requests: %v", err)
		}
		if known, _ := s.KnownDevice(t.Context(), "ann@example.com", hash("ann d1"), base.Add(-time.Hour)); !known {
			t.Error("the device was forgotten by an ended session's request")
		}
		if again, _ := s.UserByEmail(t.Context(), "ann@example.com"); again.SignOuts != ann.SignOuts {
			t.Errorf("SignOuts %d after an ended session's EndOtherSessions, want %d as before", again.SignOuts, ann.SignOuts)
		}
	}},
	{"ending the other sessions keeps this one and other accounts'", func(t *testing.T, s auth.Store) {
		ann, bob := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com")
		for _, tok := range []string{"ann 1", "ann 2", "ann 3"} {
			sessionWith(t, s, ann, tok, "192.0.2.1", "curl", base)
		}
		sessionWith(t, s, bob, "bob 1", "192.0.2.2", "curl", base)
		n, err := s.EndOtherSessions(t.Context(), ann.ID, hash("ann 2"))
		mustNil(t, err)
		if n != 2 {
			t.Errorf("EndOtherSessions ended %d, want 2", n)
		}
		for tok, live := range map[string]bool{"ann 1": false, "ann 2": true, "ann 3": false, "bob 1": true} {
			if _, err := s.SessionByHash(t.Context(), hash(tok), base); (err == nil) != live {
				t.Errorf("%s after ending ann's others: %v, want live %v", tok, err, live)
			}
		}
	}},
	{"an account lists and forgets only its own devices", func(t *testing.T, s auth.Store) {
		ann, bob := mustUser(t, s, "ann@example.com"), mustUser(t, s, "bob@example.com")
		mustNil(t, s.AddDevice(t.Context(), ann.ID, ann.PasswordHash, ann.SignOuts, hash("ann d1"), base, 10, false))
		mustNil(t, s.AddDevice(t.Context(), ann.ID, ann.PasswordHash, ann.SignOuts, hash("ann d2"), base.Add(time.Second), 10, false))
		mustNil(t, s.AddDevice(t.Context(), bob.ID, bob.PasswordHash, bob.SignOuts, hash("bob d1"), base, 10, false))
		mustNil(t, s.TouchDevice(t.Context(), hash("ann d1"), base.Add(time.Minute)))
		got, err := s.AccountDevices(t.Context(), ann.ID, 10)
		mustNil(t, err)
		if len(got) != 2 || !got[0].LastSeenAt.Equal(base.Add(time.Minute)) || !got[0].CreatedAt.Equal(base) ||
			got[0].PublicID == "" || got[0].PublicID == got[1].PublicID {
			t.Fatalf("AccountDevices = %+v; want ann's two, the one touched first, with distinct public ids", got)
		}
		bobs, err := s.AccountDevices(t.Context(), bob.ID, 10)
		mustNil(t, err)
		if len(bobs) != 1 {
			t.Fatalf("bob's devices: %+v", bobs)
		}
		sessionWith(t, s, ann, "ann 1", "192.0.2.1", "curl", base)
		if err := s.ForgetDevice(t.Context(), ann.ID, hash("ann 1"), bobs[0].PublicID); !errors.Is(err, auth.ErrNotListed) {
			t.Errorf("ann forgetting bob's device: %v, want ErrNotListed", err)
		}
		mustNil(t, s.ForgetDevice(t.Context(), ann.ID, hash("ann 1"), got[0].PublicID))
		if known, _ := s.KnownDevice(t.Context(), "ann@example.com", hash("ann d1"), base.Add(-time.Hour)); known {
			t.Error("ann's forgotten device is still known")
		}
		if known, _ := s.KnownDevice(t.Context(), "bob@example.com", hash("bob d1"), base.Add(-time.Hour)); !known {
			t.Error("bob's device was forgotten")
		}
	}},
}
