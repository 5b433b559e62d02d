package ratelimit_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// The conformance cases of places taken with a decision (Rule.Place), run
// on every store by TestStoreConformance.

// placed returns the rules of a sign-in that takes a place towards the
// account's lockout with its decision: its address' rule, generous, and
// the account's, lockable, with attempt's place.
func placed(ip, account, attempt string, ttl time.Duration) []ratelimit.Rule {
	return []ratelimit.Rule{
		{Name: "login_ip", ID: ip, Limit: ratelimit.Limit{Count: 1000, Window: time.Minute}},
		{Name: "login_account", ID: account, Limit: ratelimit.Limit{Count: 1000, Window: time.Minute}, Lockable: true,
			Place: &ratelimit.Place{Attempt: attempt, TTL: ttl}},
	}
}

// decidePlaced decides the sign-in of placed, whose rules admit it, and
// checks that its verdict is whole (checkPlaced).
func decidePlaced(t *testing.T, s ratelimit.Store, ip, account, attempt string, ttl time.Duration) ratelimit.Decision {
	t.Helper()
	d, err := s.AllowAll(t.Context(), placed(ip, account, attempt, ttl)...)
	if err != nil {
		t.Fatal(err)
	}
	checkPlaced(t, d, ttl)
	return d
}

// checkPlaced checks that the sign-in d of placed was admitted, with the
// account's place or, refused by the attempts in flight, with none: not
// locked, a wait of at most ttl.
func checkPlaced(t *testing.T, d ratelimit.Decision, ttl time.Duration) {
	t.Helper()
	ip, acct := d.Results[0], d.Results[1]
	if !d.Allowed || !ip.Allowed || !acct.Allowed || acct.Locked || ip.Token != "" || ip.InFlight || d.RetryAfter != 0 {
		t.Fatalf("%+v; want admitted by both rules, the address' with no place", d)
	}
	if acct.InFlight {
		if acct.Token != "" || acct.RetryAfter <= 0 || acct.RetryAfter > ttl {
			t.Fatalf("a place refused: %+v; want no token, retry-after in (0, %v]", acct, ttl)
		}
	} else if acct.RetryAfter != 0 {
		t.Fatalf("a place not refused: %+v; want no retry-after", acct)
	}
}

// casePlacesWithTheDecision: however many sign-ins are decided at once,
// exactly the threshold's number take a place, each its own, and the
// others are admitted without one (as a decision followed by
// BeginAttempt admits them); a place given back or a failure counted
// moves the count as BeginAttempt's places do, and the two kinds count
// together; a lock refuses as locked.
func casePlacesWithTheDecision(t *testing.T, s storeUnderTest) {
	const name = "login_account"
	p := suitePolicies[name]
	ttl := time.Minute
	for trial := range trials {
		ip, id := fmt.Sprintf("192.0.2.%d", trial), fmt.Sprintf("%d-jane@example.com", trial)
		out, errs := atOnce(40, func() (ratelimit.Decision, error) {
			return s.AllowAll(t.Context(), placed(ip, id, "", ttl)...)
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		var in []ratelimit.Decision
		tokens := map[string]bool{}
		for _, d := range out {
			checkPlaced(t, d, ttl)
			if tok := d.Results[1].Token; tok != "" {
				if tokens[tok] {
					t.Fatalf("admitted %+v; want a token of its own", d)
				}
				tokens[tok] = true
				in = append(in, d)
			} else if !d.Results[1].InFlight {
				t.Fatalf("admitted %+v; want a place, or one refused", d)
			}
		}
		if len(in) != p.Threshold {
			t.Fatalf("40 sign-ins decided at once: %d took a place; want the threshold, %d", len(in), p.Threshold)
		}
		// Every one counted, with a place or without.
		endOne(t, s, name, id, in[0].Results[1].Token)
		next := decidePlaced(t, s, ip, id, "", ttl)
		if next.Results[1].Token == "" || next.Results[0].Count != 41 || next.Results[1].Count != 41 {
			t.Fatalf("once a place is given back: %+v; want a place, 41 in each log", next)
		}
		// A failure counted, its place given back: 1 failure and the
		// threshold's less one in flight.
		failWith(t, s, name, id, "guess 1")
		endOne(t, s, name, id, in[1].Results[1].Token)
		if d := decidePlaced(t, s, ip, id, "", ttl); !d.Results[1].InFlight {
			t.Fatalf("1 failure and %d in flight, threshold %d: %+v; want the place refused", p.Threshold-1, p.Threshold, d)
		}
		// A place begun alone and one taken with a decision count as one.
		endOne(t, s, name, id, in[2].Results[1].Token)
		if b := beginOne(t, s, name, id, ttl); !b.Allowed {
			t.Fatalf("1 failure and 1 in flight: BeginAttempt %+v; want allowed", b)
		}
		if d := decidePlaced(t, s, ip, id, "", ttl); !d.Results[1].InFlight {
			t.Fatalf("1 failure, a place begun and one decided: %+v; want the place refused", d)
		}
		// Locked: refused as locked, no place.
		lockNow(t, s, name, fmt.Sprintf("locked-%s", id), p.Threshold)
		d := decide(t, s, placed(ip, fmt.Sprintf("locked-%s", id), "", ttl)...)
		if r := d.Results[1]; d.Allowed || !r.Locked || r.InFlight || r.Token != "" {
			t.Fatalf("a locked account: %+v; want refused as locked", d)
		}
	}
}

// casePlacesAllOrNone: a request's places are taken all or none, on a
// cluster too, where they live in different slots: one refused, the
// others are not held.
func casePlacesAllOrNone(t *testing.T, s storeUnderTest) {
	const id = "lena@example.com"
	p := suitePolicies["login_device"]
	ttl := time.Minute
	in := begun(t, beginAtOnce(t, s, "login_device", "a device", p.Threshold, ttl), ttl)
	if len(in) != p.Threshold {
		t.Fatalf("%d begun: %d allowed", p.Threshold, len(in))
	}
	limit := ratelimit.Limit{Count: 100, Window: time.Minute}
	d := decide(t, s,
		ratelimit.Rule{Name: "login_account", ID: id, Limit: limit, Lockable: true, Place: &ratelimit.Place{TTL: ttl}},
		ratelimit.Rule{Name: "login_device", ID: "a device", Lockable: true, Place: &ratelimit.Place{TTL: ttl}})
	if !d.Allowed || d.Results[0].Token != "" || d.Results[1].Token != "" || !d.Results[1].InFlight {
		t.Fatalf("the device's places taken: %+v; want admitted with no place, the device's refused", d)
	}
	// None of the account's places is held.
	if got := begun(t, beginAtOnce(t, s, "login_account", id, p.Threshold, ttl), ttl); len(got) != p.Threshold {
		t.Fatalf("the account's places after a refused request: %d of %d free; want all", len(got), p.Threshold)
	}
}

// casePlaceOfALockOnlyRule: a lock-only rule takes its place as a rule
// with a log does, writing nothing else; the place of an attempt the
// identity already failed with is none, even where the places are taken.
func casePlaceOfALockOnlyRule(t *testing.T, s storeUnderTest) {
	const name, id = "login_device", "a device"
	p := suitePolicies[name]
	ttl := time.Minute
	rule := func(attempt string) ratelimit.Rule {
		return ratelimit.Rule{Name: name, ID: id, Lockable: true, Place: &ratelimit.Place{Attempt: attempt, TTL: ttl}}
	}
	failWith(t, s, name, id, "an old password")
	var tokens []string
	for i := range p.Threshold {
		d := decide(t, s, rule(fmt.Sprint("guess ", i)))
		r := d.Results[0]
		switch {
		case !d.Allowed || r.Count != 0:
			t.Fatalf("a lock-only rule, unlocked: %+v; want admitted, no count", d)
		case i < p.Threshold-1 && (r.Token == "" || r.InFlight):
			t.Fatalf("place %d, after 1 failure, threshold %d: %+v; want a token", i+1, p.Threshold, r)
		case i == p.Threshold-1 && (r.Token != "" || !r.InFlight || r.RetryAfter <= 0 || r.RetryAfter > ttl):
			t.Fatalf("places taken: %+v; want the place refused", r)
		}
		if r.Token != "" {
			tokens = append(tokens, r.Token)
		}
	}
	for range 3 {
		d := decide(t, s, rule("an old password"))
		if !d.Allowed || d.Results[0].Token != "" || d.Results[0].InFlight {
			t.Fatalf("the failed attempt again, the places taken: %+v; want admitted without a place", d)
		}
	}
	endOne(t, s, name, id, tokens[0])
	if d := decide(t, s, rule("a new guess")); !d.Allowed || d.Results[0].Token == "" {
		t.Fatalf("once a place is given back: %+v; want admitted with a place", d)
	}
}

// casePlaceOfARejectedRequest: a request another rule rejects takes no
// place, on a cluster too, where its rules are decided slot by slot and
// the place taken in one slot is given back when another rejects.
func casePlaceOfARejectedRequest(t *testing.T, s storeUnderTest) {
	const name, id = "login_account", "kate@example.com"
	p := suitePolicies[name]
	ttl := time.Minute
	rules := func() []ratelimit.Rule {
		r := placed("198.51.100.7", id, "", ttl)
		r[0].Limit.Count = 1
		return r
	}
	first := decide(t, s, rules()...)
	if !first.Allowed || first.Results[1].Token == "" {
		t.Fatalf("the first sign-in: %+v; want admitted with a place", first)
	}
	for range 5 {
		d := decide(t, s, rules()...)
		if d.Allowed || d.Results[0].Allowed || d.Results[1].Token != "" || d.Results[1].InFlight {
			t.Fatalf("past the address' limit: %+v; want rejected by it, with no place", d)
		}
	}
	// One place held: the threshold's less one are free.
	if got := begun(t, beginAtOnce(t, s, name, id, p.Threshold, ttl), ttl); len(got) != p.Threshold-1 {
		t.Fatalf("one place held, %d begun at once: %d allowed; want %d", p.Threshold, len(got), p.Threshold-1)
	}
}

// casePlacesBadInput: a place no store can take is an error, and nothing
// is recorded.
func casePlacesBadInput(t *testing.T, s storeUnderTest) {
	limit := ratelimit.Limit{Count: 1, Window: time.Minute}
	place := &ratelimit.Place{TTL: time.Minute}
	for _, c := range []struct {
		why   string
		rules []ratelimit.Rule
		is    error
	}{
		{"a rule that is not lockable", []ratelimit.Rule{{Name: "login_account", ID: "x", Limit: limit, Place: place}}, nil},
		{"a rule with no lockouts", []ratelimit.Rule{{Name: "login_ip", ID: "x", Limit: limit, Lockable: true, Place: place}}, ratelimit.ErrNoLockouts},
		{"a ttl of 0", []ratelimit.Rule{{Name: "login_account", ID: "x", Limit: limit, Lockable: true, Place: &ratelimit.Place{}}}, nil},
		{"a ttl past MaxWindow", []ratelimit.Rule{{Name: "login_account", ID: "x", Limit: limit, Lockable: true,
			Place: &ratelimit.Place{TTL: ratelimit.MaxWindow + time.Second}}}, nil},
		{"two places towards one lockout", []ratelimit.Rule{
			{Name: "login_account", ID: "x", Limit: limit, Lockable: true, Place: place},
			{Name: "login_account", ID: "x", Lockable: true, Place: place},
		}, nil},
	} {
		d, err := s.AllowAll(t.Context(), c.rules...)
		if err == nil || c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %+v, %v; want an error (%v)", c.why, d, err, c.is)
		}
	}
	// Nothing was recorded: the one admission of the limit is whole.
	if d := decide(t, s, ratelimit.Rule{Name: "login_account", ID: "x", Limit: limit, Lockable: true, Place: place}); !d.Allowed {
		t.Fatalf("after the refused input: %+v; want admitted", d)
	}
}
