package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

var policy = ratelimit.LockoutPolicy{Threshold: 10, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour}

// policies are the lockouts of the stores under test: the account's and a
// browser's own, by one policy, as the service has them.
var policies = map[string]ratelimit.LockoutPolicy{"login_account": policy, "login_device": policy}

func newLockouts(t *testing.T, rdb redis.UniversalClient, prefix string) *ratelimit.Lockouts {
	t.Helper()
	l, err := ratelimit.NewLockouts(rdb, prefix, "login_account", policy)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLockoutEscalates locks, unlocks and locks again: each repeat doubles
// the lock up to the cap, and the lock key's TTL is the lock's length.
func TestLockoutEscalates(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLockouts(t, rdb, prefix)
	id := "repeat@example.com"
	want := []time.Duration{15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 16 * time.Hour, 24 * time.Hour, 24 * time.Hour}
	for level, d := range want {
		for i := 1; i < policy.Threshold; i++ {
			f, err := l.Fail(t.Context(), id, "")
			if err != nil || f.LockedNow || f.Failures != i {
				t.Fatalf("level %d, failure %d: %+v, %v; want counted, not locked", level+1, i, f, err)
			}
		}
		f, err := l.Fail(t.Context(), id, "")
		if err != nil || !f.LockedNow || f.Level != level+1 || f.LockedFor != d {
			t.Fatalf("level %d: %+v, %v; want locked for %v", level+1, f, err, d)
		}
		if again, _ := l.Fail(t.Context(), id, ""); again.LockedNow || again.Failures != 0 || again.LockedFor <= 0 {
			t.Fatalf("failure while locked: %+v, want not counted", again)
		}
		ttl := rdb.PTTL(t.Context(), keyOf(t, prefix, id, ":lock")).Val()
		if ttl <= 0 || ttl > d {
			t.Fatalf("level %d: lock TTL %v, want within (0, %v]", level+1, ttl, d)
		}
		wasLocked, err := l.Clear(t.Context(), id)
		if err != nil || !wasLocked {
			t.Fatalf("Clear: %v, %v; want it to report the lock", wasLocked, err)
		}
	}
	if wasLocked, _ := l.Clear(t.Context(), id); wasLocked {
		t.Fatal("second Clear reported a lock")
	}
	assertAllKeysExpire(t, rdb, prefix, policy.MaxDuration*2)
}

// TestLockableRule checks that a locked identity is rejected by its
// Lockable rule in the same step as the count, while a rule for the same
// request without the lock (a trusted device's bucket) still admits.
func TestLockableRule(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	lockouts := newLockouts(t, rdb, prefix)
	limiter := newLimiter(t, rdb, prefix)
	id := "target@example.com"
	account := ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(100), Lockable: true}
	device := ratelimit.Rule{Name: "login_device", ID: "device-nonce", Limit: ratelimit.PerMinute(100)}

	if d, err := limiter.AllowAll(t.Context(), account); err != nil || !d.Allowed {
		t.Fatalf("before lock: %+v, %v", d, err)
	}
	for range policy.Threshold {
		if _, err := lockouts.Fail(t.Context(), id, ""); err != nil {
			t.Fatal(err)
		}
	}
	before := len(logEntries(t, rdb, keyOf(t, prefix, id, ":log3")))
	lockBefore := rdb.PTTL(t.Context(), keyOf(t, prefix, id, ":lock")).Val()
	d, err := limiter.AllowAll(t.Context(), ratelimit.Rule{Name: "login_ip", ID: "192.0.2.9", Limit: ratelimit.PerMinute(100)}, account)
	if err != nil {
		t.Fatal(err)
	}
	lockAfter := rdb.PTTL(t.Context(), keyOf(t, prefix, id, ":lock")).Val()
	if d.Allowed || !d.Results[1].Locked {
		t.Fatalf("while locked: %+v; want rejected as locked", d)
	}
	// Never early: at least what the lock has left after the decision
	// (to the millisecond Redis keeps), at most what it had before.
	if d.RetryAfter < lockAfter || d.RetryAfter > lockBefore+time.Millisecond {
		t.Fatalf("while locked: retry-after %v, want within [%v, %v]: the lock's own time left", d.RetryAfter, lockAfter, lockBefore+time.Millisecond)
	}
	if after := len(logEntries(t, rdb, keyOf(t, prefix, id, ":log3"))); after != before || before != 1 {
		t.Fatalf("a locked rejection changed the log from %d to %d entries, want the 1 admitted before the lock", before, after)
	}
	if d, err := limiter.AllowAll(t.Context(), device); err != nil || !d.Allowed {
		t.Fatalf("device bucket while the account is locked: %+v, %v; want admitted", d, err)
	}
	if _, err := lockouts.Clear(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if d, err := limiter.AllowAll(t.Context(), account); err != nil || !d.Allowed {
		t.Fatalf("after unlock: %+v, %v; want admitted", d, err)
	}
}

func TestLockoutPolicyValidate(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	for _, p := range []ratelimit.LockoutPolicy{
		{Threshold: 0, Duration: time.Minute, MaxDuration: time.Hour},
		{Threshold: 1, Duration: 0, MaxDuration: time.Hour},
		{Threshold: 1, Duration: time.Hour, MaxDuration: time.Minute},
		{Threshold: 1, Duration: time.Minute, MaxDuration: time.Hour, Memory: -time.Second},
		// Under a millisecond: Redis would be given a memory of 0 ms, and
		// PEXPIRE 0 deletes each failure as it is counted.
		{Threshold: 2, Duration: time.Minute, MaxDuration: time.Hour, Memory: 500 * time.Microsecond},
		{Threshold: 1, Duration: time.Minute, MaxDuration: 1000 * time.Hour},
	} {
		if _, err := ratelimit.NewLockouts(rdb, prefix, "x", p); err == nil {
			t.Errorf("NewLockouts accepted %+v", p)
		}
	}
}

func keyOf(t *testing.T, prefix, id, suffix string) string {
	t.Helper()
	k, err := ratelimit.NewKeys(prefix, "login_account")
	if err != nil {
		t.Fatal(err)
	}
	return k.Key(id, suffix)
}

// assertAllKeysExpire checks that every key under prefix has a TTL within
// (0, most].
func assertAllKeysExpire(t *testing.T, rdb *redis.Client, prefix string, most time.Duration) {
	t.Helper()
	keys, err := rdb.Keys(t.Context(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys to check")
	}
	for _, k := range keys {
		if ttl := rdb.PTTL(t.Context(), k).Val(); ttl <= 0 || ttl > most {
			t.Errorf("key %q: TTL %v, want within (0, %v]", k, ttl, most)
		}
	}
}

// TestHoldOnlyLengthens: a lock held from elsewhere never shortens a lock
// Redis has nor lowers its level, and every key it writes expires.
func TestHoldOnlyLengthens(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLockouts(t, rdb, prefix)
	id := "held@example.com"
	for range policy.Threshold {
		if _, err := l.Fail(t.Context(), id, ""); err != nil {
			t.Fatal(err)
		}
	}
	lock := keyOf(t, prefix, id, ":lock")
	if err := l.Hold(t.Context(), ratelimit.HeldLock{ID: id, Until: time.Now().Add(time.Minute), Level: 1}); err != nil {
		t.Fatal(err)
	}
	if left := rdb.PTTL(t.Context(), lock).Val(); left < policy.Duration-time.Minute {
		t.Fatalf("a shorter hold shortened the lock to %v", left)
	}
	if err := l.Hold(t.Context(), ratelimit.HeldLock{ID: id, Until: time.Now().Add(2 * time.Hour), Level: 3}); err != nil {
		t.Fatal(err)
	}
	st, err := l.Status(t.Context(), id)
	if err != nil || !st.Locked || st.RetryAfter < 2*time.Hour-time.Minute || st.Level != 3 {
		t.Fatalf("after a longer hold: %+v, %v; want locked about 2h at level 3", st, err)
	}
	if err := l.Hold(t.Context(), ratelimit.HeldLock{ID: "ended@example.com", Until: time.Now().Add(-time.Second), Level: 2}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(t.Context(), keyOf(t, prefix, "ended@example.com", ":lock")).Val(); n != 0 {
		t.Fatal("a lock that had ended was held")
	}
	assertAllKeysExpire(t, rdb, prefix, 3*time.Hour+policy.MaxDuration)
}

func TestLockFor(t *testing.T) {
	p := ratelimit.LockoutPolicy{Threshold: 3, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour}
	for _, tc := range []struct {
		level int
		want  time.Duration
	}{
		{-1, 15 * time.Minute}, {0, 15 * time.Minute}, {1, 15 * time.Minute}, {2, 30 * time.Minute},
		{3, time.Hour}, {7, 16 * time.Hour}, {8, 24 * time.Hour}, {9, 24 * time.Hour},
		{63, 24 * time.Hour}, {64, 24 * time.Hour}, {1 << 30, 24 * time.Hour},
	} {
		if got := p.LockFor(tc.level); got != tc.want {
			t.Errorf("LockFor(%d) = %v, want %v", tc.level, got, tc.want)
		}
	}
	// The longest durations a policy may hold must not overflow either.
	long := ratelimit.LockoutPolicy{Threshold: 1, Duration: ratelimit.MaxWindow, MaxDuration: ratelimit.MaxWindow}
	for level := range 70 {
		if got := long.LockFor(level); got != ratelimit.MaxWindow {
			t.Fatalf("LockFor(%d) of a policy at the bound = %v, want %v", level, got, ratelimit.MaxWindow)
		}
	}
}

// BenchmarkHoldLocks: putting the lockouts in force back into a Redis
// that came back without its scripts, as a failback after a large attack
// does (Failover allows 2 s and 100 µs a lock); one op holds n locks.
// TestClearBeforeEndsOnlyWhatCameBefore: an unlock made elsewhere, given
// to Redis later with its time, ends a lock and failures from before it,
// not those from after it; a lock longer than its level's (an
// administrator's) has no start to compare, and ends.
func TestClearBeforeEndsOnlyWhatCameBefore(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := newLockouts(t, rdb, prefix)
	lock := func(id string) {
		for {
			f, err := l.Fail(t.Context(), id, "")
			if err != nil {
				t.Fatal(err)
			}
			if f.LockedNow {
				return
			}
		}
	}
	fail := func(id string) {
		for i := range 3 {
			if _, err := l.Fail(t.Context(), id, fmt.Sprint("guess ", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := time.Now()
	time.Sleep(5 * time.Millisecond)
	lock("later-lock")
	fail("later-failures")
	// An administrator's lock, longer than its level's: its start is
	// known only if it was given.
	err := l.Hold(t.Context(),
		ratelimit.HeldLock{Name: "login_account", ID: "admin-lock", Until: time.Now().Add(2 * time.Hour), Level: 1},
		ratelimit.HeldLock{Name: "login_account", ID: "admin-lock-since", Since: time.Now(), Until: time.Now().Add(2 * time.Hour), Level: 1},
		// Given by a clock running ahead: begun when held, after the
		// unlocks made before that and before those made after.
		ratelimit.HeldLock{Name: "login_account", ID: "since-ahead", Since: time.Now().Add(10 * time.Minute), Until: time.Now().Add(2 * time.Hour), Level: 1},
		ratelimit.HeldLock{Name: "login_account", ID: "since-ahead-kept", Since: time.Now().Add(10 * time.Minute), Until: time.Now().Add(2 * time.Hour), Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A lock written before locks kept their start holds its level alone:
	// its start is its level's length before its end.
	if err := rdb.Set(t.Context(), keyOf(t, prefix, "level-alone", ":lock"), 1, policy.LockFor(1)).Err(); err != nil {
		t.Fatal(err)
	}
	lock("earlier-lock")
	fail("earlier-failures")
	time.Sleep(5 * time.Millisecond)
	after := time.Now()
	err = l.ClearBefore(t.Context(),
		ratelimit.PastUnlock{Name: "login_account", ID: "later-lock", At: before},
		ratelimit.PastUnlock{Name: "login_account", ID: "later-failures", At: before},
		ratelimit.PastUnlock{Name: "login_account", ID: "admin-lock", At: before},
		ratelimit.PastUnlock{Name: "login_account", ID: "admin-lock-since", At: before},
		ratelimit.PastUnlock{Name: "login_account", ID: "level-alone", At: before},
		ratelimit.PastUnlock{Name: "login_account", ID: "since-ahead", At: after},
		ratelimit.PastUnlock{Name: "login_account", ID: "since-ahead-kept", At: before},
		ratelimit.PastUnlock{Name: "login_account", ID: "earlier-lock", At: after},
		ratelimit.PastUnlock{Name: "login_account", ID: "earlier-failures", At: after},
	)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]ratelimit.LockStatus{
		"later-lock":       {Locked: true, Level: 1},
		"later-failures":   {Failures: 3},
		"admin-lock":       {Level: 1},
		"admin-lock-since": {Locked: true, Level: 1},
		"level-alone":      {Locked: true},
		"since-ahead":      {Level: 1},
		"since-ahead-kept": {Locked: true, Level: 1},
		"earlier-lock":     {Level: 1},
		"earlier-failures": {},
	} {
		st, err := l.Status(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		st.RetryAfter = 0
		if st != want {
			t.Errorf("%s after an unlock given with its time: %+v, want %+v", id, st, want)
		}
	}
}

// BenchmarkClearBefore: the unlocks an outage made, given to Redis at the
// failback, each one a locked identity's.
func BenchmarkClearBefore(b *testing.B) {
	benchLocks(b, "µs/unlock", func(b *testing.B, l *ratelimit.Lockouts, held func(time.Time) []ratelimit.HeldLock) {
		var unlocks []ratelimit.PastUnlock
		for b.Loop() {
			b.StopTimer()
			locks := held(time.Now().Add(policy.LockFor(1)))
			if err := l.Hold(b.Context(), locks...); err != nil {
				b.Fatal(err)
			}
			at := time.Now().Add(time.Millisecond)
			unlocks = unlocks[:0]
			for _, h := range locks {
				unlocks = append(unlocks, ratelimit.PastUnlock{Name: h.Name, ID: h.ID, At: at})
			}
			b.StartTimer()
			if err := l.ClearBefore(b.Context(), unlocks...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkHoldLocks(b *testing.B) {
	benchLocks(b, "µs/lock", func(b *testing.B, l *ratelimit.Lockouts, held func(time.Time) []ratelimit.HeldLock) {
		for b.Loop() {
			b.StopTimer()
			locks := held(time.Now().Add(time.Hour))
			b.StartTimer()
			if err := l.Hold(b.Context(), locks...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchLocks runs run over 10,000 and 100,000 locks of as many accounts,
// reporting the time per lock under unit. held returns the locks ending at
// until, Redis' scripts flushed first: a Redis back after an outage may
// have none loaded.
func benchLocks(b *testing.B, unit string, run func(b *testing.B, l *ratelimit.Lockouts, held func(until time.Time) []ratelimit.HeldLock)) {
	rdb, prefix := testenv.Redis(b)
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			l, err := ratelimit.NewLockouts(rdb, prefix, "login_account", policy)
			if err != nil {
				b.Fatal(err)
			}
			locks := make([]ratelimit.HeldLock, n)
			for i := range locks {
				locks[i] = ratelimit.HeldLock{Name: "login_account", ID: fmt.Sprint("held-", i, "@example.com"), Level: 1}
			}
			run(b, l, func(until time.Time) []ratelimit.HeldLock {
				if err := rdb.ScriptFlush(b.Context()).Err(); err != nil {
					b.Fatal(err)
				}
				for i := range locks {
					locks[i].Until = until
				}
				return locks
			})
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), unit)
		})
	}
}

// TestRedisStoreOneRuleRefusedKeepsNoOtherOut: a key of the wrong type
// under one rule (written by something else under the prefix) fails that
// rule's hold or unlock alone. A failback, which logs such a refusal and
// does not give it again, must not have lost with it the locks, or the
// unlocks, of the other rules, whichever the store reached first.
func TestRedisStoreOneRuleRefusedKeepsNoOtherOut(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s, err := ratelimit.NewRedisStore(rdb, prefix, policies)
	if err != nil {
		t.Fatal(err)
	}
	device, err := ratelimit.NewKeys(prefix, "login_device")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		bad, good := fmt.Sprint("refused", i), fmt.Sprint("held", i)
		// hold.lua reads the identity's level.
		if err := rdb.RPush(t.Context(), keyOf(t, prefix, bad, ":level"), "x").Err(); err != nil {
			t.Fatal(err)
		}
		until := time.Now().Add(time.Hour)
		err := s.Hold(t.Context(),
			ratelimit.HeldLock{Name: "login_account", ID: bad, Until: until, Level: 1},
			ratelimit.HeldLock{Name: "login_device", ID: good, Until: until, Level: 1})
		if err == nil {
			t.Fatal("a hold over a key of the wrong type reported no error")
		}
		if rdb.Exists(t.Context(), device.Key(good, ":lock")).Val() != 1 {
			t.Fatalf("hold %d: the other rule's lock was not held: %v", i, err)
		}
		// clear.lua reads a lock that has time left.
		if err := rdb.RPush(t.Context(), keyOf(t, prefix, bad, ":lock"), "x").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Expire(t.Context(), keyOf(t, prefix, bad, ":lock"), time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		err = s.ClearBefore(t.Context(),
			ratelimit.PastUnlock{Name: "login_account", ID: bad, At: time.Now()},
			ratelimit.PastUnlock{Name: "login_device", ID: good, At: time.Now()})
		if err == nil {
			t.Fatal("an unlock over a key of the wrong type reported no error")
		}
		if rdb.Exists(t.Context(), device.Key(good, ":lock")).Val() != 0 {
			t.Fatalf("unlock %d: the other rule's lock was not ended: %v", i, err)
		}
	}
}

// TestLockoutOfPartMillisecondsNotShort: Redis counts a lock in whole
// milliseconds. A policy whose lengths are not whole milliseconds (a
// lock as long as a rule's window, written "3/1500us") must lock in Redis
// for at least what LockFor says, as the in-process store does, and
// remember the level for at least its Memory: never a part of a
// millisecond less.
func TestLockoutOfPartMillisecondsNotShort(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	p := ratelimit.LockoutPolicy{Threshold: 1, Duration: 20*time.Millisecond + 500*time.Microsecond, MaxDuration: 70*time.Millisecond + 500*time.Microsecond, Memory: 10*time.Second + 500*time.Microsecond}
	l, err := ratelimit.NewLockouts(rdb, prefix, "login_account", p)
	if err != nil {
		t.Fatal(err)
	}
	id := "part@example.com"
	for level := 1; level <= 4; level++ {
		var f ratelimit.Failure
		var before time.Time
		for !f.LockedNow {
			before = time.Now()
			if f, err = l.Fail(t.Context(), id, ""); err != nil {
				t.Fatal(err)
			}
		}
		if f.Level != level || f.LockedFor < p.LockFor(level) {
			t.Fatalf("lock %d: %+v; want level %d, locked for at least %v", level, f, level, p.LockFor(level))
		}
		// Redis keeps a key through the millisecond it expires at. Its
		// absolute expiry, unlike the time it has left, does not shrink
		// while a busy machine runs the test.
		at := rdb.PExpireTime(t.Context(), keyOf(t, prefix, id, ":lock")).Val()
		switch {
		case at == -2: // gone: no fault once the lock's length has passed
			if took := time.Since(before); took < p.LockFor(level) {
				t.Fatalf("lock %d: its key was gone %v after the failure, before its %v", level, took, p.LockFor(level))
			}
		case at < 0:
			t.Fatalf("lock %d: its key has no expiry", level)
		default:
			if lasts := time.UnixMilli(at.Milliseconds()).Add(time.Millisecond); lasts.Before(before.Add(p.LockFor(level))) {
				t.Fatalf("lock %d: its key lasts until %v, want at least %v after %v", level, lasts, p.LockFor(level), before)
			}
		}
		time.Sleep(p.MaxDuration + 2*time.Millisecond)
	}
}

// TestLockTimeLeftNeverEarly: a failure while locked, and Status, say how
// long the lock has left. Redis counts it in whole milliseconds, and keeps
// the key through the last of them: the time left must reach past it, as
// a decision's retry-after does, so that a caller who waits that long
// finds the lock gone, never a part of a millisecond before.
func TestLockTimeLeftNeverEarly(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	p := ratelimit.LockoutPolicy{Threshold: 1, Duration: 30 * time.Millisecond, MaxDuration: 30 * time.Millisecond, Memory: time.Second}
	l, err := ratelimit.NewLockouts(rdb, prefix, "login_account", p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		for _, status := range []bool{false, true} {
			id := fmt.Sprint("left", i, status)
			began := time.Now()
			if f, err := l.Fail(t.Context(), id, ""); err != nil || !f.LockedNow {
				t.Fatalf("first failure: %+v, %v", f, err)
			}
			time.Sleep(time.Duration(i) * time.Millisecond / 2)
			// On a loaded machine the lock may have ended before the
			// next call: that is no fault once its duration has passed
			// since the call that made it began.
			ended := func() {
				if took := time.Since(began); took < p.Duration {
					t.Fatalf("trial %d (status %v): the lock ended %v after it began, before its %v", i, status, took, p.Duration)
				}
			}
			var left time.Duration
			if status {
				st, err := l.Status(t.Context(), id)
				if err != nil {
					t.Fatalf("status: %+v, %v", st, err)
				}
				if !st.Locked {
					ended()
					continue
				}
				left = st.RetryAfter
			} else {
				f, err := l.Fail(t.Context(), id, "")
				if err != nil || f.LockedFor <= 0 {
					t.Fatalf("failure while locked: %+v, %v", f, err)
				}
				if f.LockedNow {
					ended() // and this failure locked it anew
				}
				left = f.LockedFor
			}
			time.Sleep(left)
			if n := rdb.Exists(t.Context(), keyOf(t, prefix, id, ":lock")).Val(); n != 0 {
				t.Fatalf("trial %d (status %v): still locked after the %v said left", i, status, left)
			}
		}
	}
}
