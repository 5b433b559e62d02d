package ratelimit_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// TestLocalEvictsLeastRecentlyUsed: past its bound the in-process store
// still admits new identities, forgetting the least recently used one
// (not merely the oldest), and a flood of new identities does not push
// out a lock.
func TestLocalEvictsLeastRecentlyUsed(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l, err := ratelimit.NewLocal(policies, 100, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	rule := func(i int) ratelimit.Rule {
		return ratelimit.Rule{Name: "login_ip", ID: fmt.Sprint(i), Limit: ratelimit.PerMinute(1)}
	}
	allowed := func(i int) bool {
		d, err := l.AllowAll(t.Context(), rule(i))
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	for i := range 100 {
		if !allowed(i) {
			t.Fatalf("identity %d rejected below the bound", i)
		}
	}
	if allowed(0) {
		t.Fatal("identity 0 admitted twice within its limit of 1")
	}
	// Identity 0 was just used; 1 is now the least recently used.
	for i := 100; i < 150; i++ {
		if !allowed(i) {
			t.Fatalf("new identity %d rejected past the bound; want the least recently used forgotten", i)
		}
	}
	if allowed(0) {
		t.Error("identity 0, used recently, was forgotten")
	}
	if !allowed(1) {
		t.Error("identity 1, the least recently used, is still remembered past the bound")
	}

	// A lock survives a flood of fresh identities ten times the bound.
	for range policy.Threshold {
		if _, err := l.Fail(t.Context(), "login_account", "victim", ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1000; i < 2000; i++ {
		allowed(i)
	}
	d, err := l.AllowAll(t.Context(), ratelimit.Rule{Name: "login_account", ID: "victim", Limit: ratelimit.PerMinute(5), Lockable: true})
	if err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("locked identity after a flood of 1000 new ones: %+v, %v; want still locked", d, err)
	}
}

// TestLocalExactPerIdentity: many identities decided at once, spread over
// the store's shards, each admit exactly their limit.
func TestLocalExactPerIdentity(t *testing.T) {
	l := newLocal(t)
	const identities, each, limit = 64, 40, 10
	admitted := make([]atomic.Int64, identities)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range identities * each {
		wg.Go(func() {
			<-start
			id := i % identities
			d, err := l.AllowAll(t.Context(),
				ratelimit.Rule{Name: "login_ip", ID: fmt.Sprint("net", i%7), Limit: ratelimit.PerMinute(identities * each)},
				ratelimit.Rule{Name: "login_account", ID: fmt.Sprint("acct", id), Limit: ratelimit.PerMinute(limit), Lockable: true})
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				admitted[id].Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	for id := range admitted {
		if got := admitted[id].Load(); got != limit {
			t.Errorf("identity %d: admitted %d of %d, want exactly %d", id, got, each, limit)
		}
	}
}

// TestLocalLocksOutlastAFloodOfFailures: failures for more fresh
// identities than the store holds push out failure counts, never a lock
// in force, nor its level.
func TestLocalLocksOutlastAFloodOfFailures(t *testing.T) {
	const bound = 2048
	l, err := ratelimit.NewLocal(policies, bound, nil)
	if err != nil {
		t.Fatal(err)
	}
	victim := ratelimit.Rule{Name: "login_account", ID: "victim@example.com", Limit: ratelimit.PerMinute(1000), Lockable: true}
	for {
		f, err := l.Fail(t.Context(), victim.Name, victim.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if f.LockedNow {
			break
		}
	}
	for i := range 3 * bound {
		if _, err := l.Fail(t.Context(), "login_account", fmt.Sprintf("fresh%d@example.com", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := l.AllowAll(t.Context(), victim); err != nil || d.Allowed || !d.Results[0].Locked {
		t.Fatalf("after %d fresh failures: %+v, %v; want the victim still locked", 3*bound, d, err)
	}
	if f, _ := l.Fail(t.Context(), victim.Name, victim.ID, ""); f.Level != 1 || f.LockedFor <= 0 {
		t.Fatalf("the victim's lock after the flood: %+v; want level 1, in force", f)
	}
}

// TestLocalLocksOfOneRuleKeepOthers: a flood of locks of one rule (the
// decision API's failed key checks, cheap to cause from many networks)
// pushes out its own locks, not another rule's: neither an account's lock
// made during the flood nor those restored from the lockout log when
// Redis was lost, even when they are most of the store. The store stays
// within its bound, the restored locks besides.
func TestLocalLocksOfOneRuleKeepOthers(t *testing.T) {
	const bound = 1024
	cheap := ratelimit.LockoutPolicy{Threshold: 1, Duration: time.Hour, MaxDuration: time.Hour}
	l, err := ratelimit.NewLocal(map[string]ratelimit.LockoutPolicy{"login_account": policy, "apikey_ip": cheap}, bound, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := l.Hold(ctx, ratelimit.HeldLock{Name: "login_account", ID: "victim@example.com", Until: time.Now().Add(24 * time.Hour), Level: 8}); err != nil {
		t.Fatal(err)
	}
	account := func(id string) ratelimit.Rule {
		return ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(1000), Lockable: true}
	}
	for i := range 3 * bound {
		if _, err := l.Fail(ctx, "apikey_ip", fmt.Sprintf("2001:db8:%x::/64", i), ""); err != nil {
			t.Fatal(err)
		}
		if i == bound {
			// Another account locked once the store is full of the
			// flood's locks.
			for {
				f, err := l.Fail(ctx, "login_account", "later@example.com", "")
				if err != nil {
					t.Fatal(err)
				}
				if f.LockedNow {
					break
				}
			}
		}
	}
	for _, id := range []string{"victim@example.com", "later@example.com"} {
		if d, err := l.AllowAll(ctx, account(id)); err != nil || d.Allowed || !d.Results[0].Locked {
			t.Errorf("%s after a flood of %d other locks: %+v, %v; want still locked", id, 3*bound, d, err)
		}
	}
	if n := l.Locks(); n > bound+1 {
		t.Errorf("%d locks kept, want at most %d and the one restored", n, bound)
	}
	// Locks restored from the lockout log, most of the store: a flood of
	// another rule's takes none of them.
	restored := make([]ratelimit.HeldLock, 900)
	for i := range restored {
		restored[i] = ratelimit.HeldLock{Name: "login_account", ID: fmt.Sprintf("restored%d@example.com", i), Until: time.Now().Add(time.Hour), Level: 1}
	}
	if err := l.Hold(ctx, restored...); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * bound {
		if _, err := l.Fail(ctx, "apikey_ip", fmt.Sprintf("2001:db8:1:%x::/64", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range restored {
		if d, err := l.AllowAll(ctx, account(h.ID)); err != nil || d.Allowed {
			t.Fatalf("%s, restored, after a flood of %d other locks: %+v, %v; want still locked", h.ID, 3*bound, d, err)
		}
	}
	if n := l.Locks(); n > bound+len(restored)+1 {
		t.Errorf("%d locks kept, want at most %d and the %d restored", n, bound, len(restored)+1)
	}
	// The flood's own locks: the newest kept, the oldest pushed out.
	newest := ratelimit.Rule{Name: "apikey_ip", ID: fmt.Sprintf("2001:db8:1:%x::/64", 3*bound-1), Lockable: true}
	if d, err := l.AllowAll(ctx, newest); err != nil || d.Allowed {
		t.Errorf("the flood's newest lock: %+v, %v; want in force", d, err)
	}
}

// shopApart returns a Local of bound identities whose login_account
// policy locks after threshold failures and sets apart the accounts of
// the application "shop", "app shop ACCOUNT", as auth does; and that
// policy.
func shopApart(t *testing.T, threshold, bound int) (*ratelimit.Local, ratelimit.LockoutPolicy) {
	t.Helper()
	grouped := policy
	grouped.Threshold = threshold
	grouped.Group = func(id string) string {
		if strings.HasPrefix(id, "app shop ") {
			return "app shop"
		}
		return ""
	}
	l, err := ratelimit.NewLocal(map[string]ratelimit.LockoutPolicy{"login_account": grouped}, bound, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l, grouped
}

// TestLocalLocksOfOneGroupKeepOthers: where a policy's Group sets apart a
// class of a rule's identities (an application's accounts, named by
// whoever holds its key, beside XCloak's own), a flood of that class's
// locks pushes out its own, not the rule's other identities' locks,
// neither one made during the flood nor one restored from the lockout log.
func TestLocalLocksOfOneGroupKeepOthers(t *testing.T) {
	const bound = 1024
	l, _ := shopApart(t, 1, bound)
	ctx := t.Context()
	if err := l.Hold(ctx, ratelimit.HeldLock{Name: "login_account", ID: "victim@example.com", Until: time.Now().Add(24 * time.Hour), Level: 8}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * bound {
		if _, err := l.Fail(ctx, "login_account", fmt.Sprintf("app shop user%d", i), ""); err != nil {
			t.Fatal(err)
		}
		if i == bound {
			if f, err := l.Fail(ctx, "login_account", "later@example.com", ""); err != nil || !f.LockedNow {
				t.Fatalf("later@example.com: %+v, %v; want locked", f, err)
			}
		}
	}
	for _, id := range []string{"victim@example.com", "later@example.com"} {
		rule := ratelimit.Rule{Name: "login_account", ID: id, Limit: ratelimit.PerMinute(1000), Lockable: true}
		if d, err := l.AllowAll(ctx, rule); err != nil || d.Allowed || !d.Results[0].Locked {
			t.Errorf("%s after a flood of %d application accounts' locks: %+v, %v; want still locked", id, 3*bound, d, err)
		}
	}
	if n := l.Locks(); n > bound+1 {
		t.Errorf("%d locks kept, want at most %d and the one restored", n, bound)
	}
	newest := ratelimit.Rule{Name: "login_account", ID: fmt.Sprintf("app shop user%d", 3*bound-1), Limit: ratelimit.PerMinute(1000), Lockable: true}
	if d, err := l.AllowAll(ctx, newest); err != nil || d.Allowed {
		t.Errorf("the flood's newest lock: %+v, %v; want in force", d, err)
	}
}

// TestLocalGroupsKeepCountsApart: a class of identities that a policy's
// Group sets apart keeps its logs and failure counts apart too. A flood
// of one application's accounts, admitted or failing below the threshold,
// neither forgets an XCloak account's failures short of its lock nor
// clears its log, and the store keeps within its bounds.
func TestLocalGroupsKeepCountsApart(t *testing.T) {
	const bound = 256
	l, grouped := shopApart(t, policy.Threshold, bound)
	ctx := t.Context()
	limit := ratelimit.Limit{Count: 3, Window: time.Hour}
	rule := func(id string) ratelimit.Rule {
		return ratelimit.Rule{Name: "login_account", ID: id, Limit: limit, Lockable: true}
	}
	for range limit.Count {
		if d, err := l.AllowAll(ctx, rule("ann@example.com")); err != nil || !d.Allowed {
			t.Fatalf("ann's admissions: %+v, %v", d, err)
		}
	}
	for range grouped.Threshold - 1 {
		if f, err := l.Fail(ctx, "login_account", "ann@example.com", ""); err != nil || f.LockedNow {
			t.Fatalf("ann's failures: %+v, %v", f, err)
		}
	}
	for i := range 4 * bound {
		id := fmt.Sprintf("app shop user%d", i)
		if _, err := l.AllowAll(ctx, rule(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Fail(ctx, "login_account", id, ""); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := l.AllowAll(ctx, rule("ann@example.com")); err != nil || d.Allowed {
		t.Errorf("ann after a flood of an application's accounts: %+v, %v; want her log still full", d, err)
	}
	if f, err := l.Fail(ctx, "login_account", "ann@example.com", ""); err != nil || !f.LockedNow {
		t.Errorf("ann's last failure after the flood: %+v, %v; want it to lock", f, err)
	}
	if logs, lockouts, locks := l.Sizes(); logs > bound || lockouts > bound || locks > bound {
		t.Errorf("%d logs, %d failure counts, %d locks kept, want at most %d each", logs, lockouts, locks, bound)
	}
}

// TestLocalLogUnderAnotherWindow: a rule's log counts in the window of the
// rule deciding, as Redis' does, not in the window of the rule that first
// wrote it. Counted in a window of a minute once the rule's is ten, the
// log would admit a request a minute after its limit was used up; counted
// in ten minutes once the rule's is one, it would report more requests in
// the window than the limit while admitting.
func TestLocalLogUnderAnotherWindow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l, err := ratelimit.NewLocal(policies, 0, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	allow := func(id string, lim ratelimit.Limit) ratelimit.Result {
		t.Helper()
		d, err := l.AllowAll(t.Context(), ratelimit.Rule{Name: "login_ip", ID: id, Limit: lim})
		if err != nil {
			t.Fatal(err)
		}
		return d.Results[0]
	}

	// Raised: 3 a minute, then 3 in ten minutes.
	if r := allow("raised", ratelimit.PerMinute(3)); !r.Allowed {
		t.Fatalf("first request: %+v", r)
	}
	tenMinutes := ratelimit.Limit{Count: 3, Window: 10 * time.Minute}
	for range 2 {
		now = now.Add(time.Second)
		if r := allow("raised", tenMinutes); !r.Allowed {
			t.Fatalf("within the limit: %+v", r)
		}
	}
	now = now.Add(5 * time.Minute)
	if r := allow("raised", tenMinutes); r.Allowed || r.Count != 3 || r.RetryAfter != 5*time.Minute-2*time.Second {
		t.Fatalf("a fourth request within ten minutes: %+v; want rejected at 3 until the first leaves", r)
	}

	// Lowered: 3 in ten minutes, then 3 a minute.
	for range 3 {
		now = now.Add(time.Minute)
		if r := allow("lowered", tenMinutes); !r.Allowed {
			t.Fatalf("within the limit: %+v", r)
		}
	}
	now = now.Add(2 * time.Minute)
	if r := allow("lowered", ratelimit.PerMinute(3)); !r.Allowed || r.Count != 1 || r.Remaining != 2 {
		t.Fatalf("a request with none in the last minute: %+v; want admitted as the first, 2 remaining", r)
	}
}
