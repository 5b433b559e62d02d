package postgres_test

import (
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/postgres"
)

// TestAccountActivity: an account's list holds its own events since it was
// created and nothing else: not another account's, not rows on its address
// without its id, not its id's rows from before it existed, not kinds it
// was not asked for (new_device, whose sign-in says it). Its failed sign-ins are one entry per network and
// hour that adds up summary rows' counts; pages follow one another without
// gaps or repeats.
func TestAccountActivity(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	ann, err := s.CreateUser(ctx, "ann@example.com", "hash", false)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := s.CreateUser(ctx, "bob@example.com", "hash", false)
	if err != nil {
		t.Fatal(err)
	}
	// An hour boundary well after both accounts were created.
	h := ann.CreatedAt.UTC().Truncate(time.Hour).Add(3 * time.Hour)
	ev := func(at time.Time, kind string, user auth.User, ip string, detail map[string]string) auth.Event {
		return auth.Event{At: at, Kind: kind, Account: user.Email, UserID: user.ID, Source: ip, Detail: detail}
	}
	batch := []auth.Event{
		// Before the account existed, under its id and without one.
		ev(ann.CreatedAt.Add(-time.Minute), auth.EventLoginFailed, ann, "198.51.100.9", nil),
		{At: h.Add(time.Minute), Kind: auth.EventLoginFailed, Account: ann.Email, Source: "198.51.100.9"},
		// Another account's.
		ev(h.Add(2*time.Minute), auth.EventLoginSucceeded, bob, "198.51.100.7", nil),
		ev(h.Add(2*time.Minute), auth.EventLoginFailed, bob, "198.51.100.1", nil),
		// Kinds not asked for.
		ev(h.Add(3*time.Minute), auth.EventResetMailDropped, ann, "198.51.100.1", nil),
		// Ann's: three failures from one network in the first hour (one a
		// summary of 4), one from another, one in the next hour.
		ev(h.Add(5*time.Minute), auth.EventLoginFailed, ann, "198.51.100.1", nil),
		ev(h.Add(10*time.Minute), auth.EventLoginFailed, ann, "198.51.100.1", map[string]string{"count": "4"}),
		ev(h.Add(20*time.Minute), auth.EventLoginFailed, ann, "198.51.100.1", nil),
		ev(h.Add(25*time.Minute), auth.EventLoginFailed, ann, "198.51.100.2", nil),
		ev(h.Add(30*time.Minute), auth.EventNewDevice, ann, "198.51.100.3", nil),
		ev(h.Add(30*time.Minute), auth.EventLoginSucceeded, ann, "198.51.100.3", map[string]string{"device": "new"}),
		ev(h.Add(35*time.Minute), auth.EventLoginSucceeded, ann, "198.51.100.3", nil),
		ev(h.Add(40*time.Minute), auth.EventLockout, ann, "198.51.100.1", nil),
		ev(h.Add(70*time.Minute), auth.EventLoginFailed, ann, "198.51.100.1", nil),
		ev(h.Add(80*time.Minute), auth.EventPasswordChanged, ann, "198.51.100.3", nil),
	}
	if err := s.InsertEvents(ctx, auth.NewEventBatchID(), batch); err != nil {
		t.Fatal(err)
	}
	type entry struct {
		at        time.Time
		kind      string
		network   string
		count     int
		newDevice bool
	}
	want := []entry{
		{h.Add(80 * time.Minute), auth.EventPasswordChanged, "198.51.100.3", 1, false},
		{h.Add(70 * time.Minute), auth.EventLoginFailed, "198.51.100.1", 1, false},
		{h.Add(40 * time.Minute), auth.EventLockout, "198.51.100.1", 1, false},
		{h.Add(35 * time.Minute), auth.EventLoginSucceeded, "198.51.100.3", 1, false},
		{h.Add(30 * time.Minute), auth.EventLoginSucceeded, "198.51.100.3", 1, true},
		{h.Add(25 * time.Minute), auth.EventLoginFailed, "198.51.100.2", 1, false},
		{h.Add(20 * time.Minute), auth.EventLoginFailed, "198.51.100.1", 6, false},
	}
	kinds := auth.ActivityKinds()
	// Steps of a few events split the list between steps, at and within
	// the hour holding the failures of 198.51.100.1.
	for _, step := range []int{1, 2, 3, 5, 2000} {
		s.SetActivityStep(step)
		for _, size := range []int{1, 2, 3, 50} {
			var got []entry
			var cursor auth.ActivityCursor
			for page := 0; page < 20; page++ {
				list, err := s.AccountActivity(ctx, ann.ID, kinds, cursor, size)
				if err != nil {
					t.Fatal(err)
				}
				if len(list) > size {
					t.Fatalf("page of %d: %d entries", size, len(list))
				}
				for _, a := range list {
					got = append(got, entry{a.At.UTC(), a.Kind, a.Network, a.Count, a.NewDevice})
				}
				if len(list) < size {
					break
				}
				last := list[len(list)-1]
				cursor = auth.ActivityCursor{At: last.At, ID: last.ID}
			}
			if len(got) != len(want) {
				t.Fatalf("steps of %d, pages of %d: got %d entries %v, want %d %v", step, size, len(got), got, len(want), want)
			}
			for i := range want {
				if !got[i].at.Equal(want[i].at) || got[i].kind != want[i].kind || got[i].network != want[i].network || got[i].count != want[i].count || got[i].newDevice != want[i].newDevice {
					t.Errorf("steps of %d, pages of %d, entry %d: got %+v, want %+v", step, size, i, got[i], want[i])
				}
			}
		}
	}
	list, err := s.AccountActivity(ctx, bob.ID, kinds, auth.ActivityCursor{}, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Errorf("bob's list: %+v, want his sign-in and his failure", list)
	}
}

// BenchmarkAccountActivity reads the first page of one account's activity
// in a log of 200,000 events of 1,000 other accounts over the same half
// hour: recent, 2,000 events of its own, half of them failures, over half
// an hour; attacked, 200,000 failures from 10,000 networks over 90 days,
// the retention of a long attack on it, under its 2,000 events; under
// attack, another account's 200,000 such failures, the newest its last.
func BenchmarkAccountActivity(b *testing.B) {
	_, pool := testenv.Schema(b)
	s := postgres.New(pool)
	ctx := b.Context()
	ann, err := s.CreateUser(ctx, "ann@example.com", "hash", false)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO security_events (at, kind, account_key, user_id, ip)
		SELECT $1::timestamptz + g * interval '10 milliseconds', CASE WHEN g % 2 = 0 THEN 'login_failed' ELSE 'login_succeeded' END,
			'other', 1000 + g % 1000, '198.51.100.' || (g % 200)
		FROM generate_series(1, 200000) g`, ann.CreatedAt); err != nil {
		b.Fatal(err)
	}
	attack := ann.CreatedAt.Add(time.Minute)
	recent := attack.Add(90 * 24 * time.Hour)
	if _, err := pool.Exec(ctx, `
		INSERT INTO security_events (at, kind, account_key, user_id, ip)
		SELECT $2::timestamptz + g * interval '1 second', CASE WHEN g % 2 = 0 THEN 'login_failed' ELSE 'login_succeeded' END,
			'ann@example.com', $1, '198.51.100.' || (g % 20)
		FROM generate_series(1, 2000) g`, ann.ID, recent); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE security_events`); err != nil {
		b.Fatal(err)
	}
	kinds := auth.ActivityKinds()
	page := func(b *testing.B) {
		for b.Loop() {
			list, err := s.AccountActivity(ctx, ann.ID, kinds, auth.ActivityCursor{}, 50)
			if err != nil || len(list) != 50 {
				b.Fatal(len(list), err)
			}
		}
	}
	b.Run("recent", page)
	if _, err := pool.Exec(ctx, `
		INSERT INTO security_events (at, kind, account_key, user_id, ip)
		SELECT $2::timestamptz + g * interval '38880 milliseconds', 'login_failed',
			'ann@example.com', $1, '10.' || (g % 10000 / 100) || '.' || (g % 100) || '.0'
		FROM generate_series(1, 200000) g`, ann.ID, attack); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE security_events`); err != nil {
		b.Fatal(err)
	}
	b.Run("attacked", page)
	bob, err := s.CreateUser(ctx, "bob@example.com", "hash", false)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO security_events (at, kind, account_key, user_id, ip)
		SELECT $2::timestamptz + g * interval '38880 milliseconds', 'login_failed',
			'bob@example.com', $1, '10.' || (g % 10000 / 100) || '.' || (g % 100) || '.0'
		FROM generate_series(1, 200000) g`, bob.ID, bob.CreatedAt.Add(time.Minute)); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE security_events`); err != nil {
		b.Fatal(err)
	}
	b.Run("under attack", func(b *testing.B) {
		for b.Loop() {
			list, err := s.AccountActivity(ctx, bob.ID, kinds, auth.ActivityCursor{}, 50)
			if err != nil || len(list) != 50 {
				b.Fatal(len(list), err)
			}
		}
	})
}
