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

// decidePlaced decides the sign-in of placed and checks that its verdict
// is whole: admitted with a token of the account's rule alone, or refused
// by the places as they refuse (not locked, a wait of at most ttl, no
// token) and by no other rule.
func decidePlaced(t *testing.T, s ratelimit.Store, ip, account, attempt string, ttl time.Duration) ratelimit.Decision {
	t.Helper()
	d, err := s.AllowAll(t.Context(), placed(ip, account, attempt, ttl)...)
	if err != nil {
		t.Fatal(err)
	}
	checkPlaced(t, d, ttl)
	return d
}

func checkPlaced(t *testing.T, d ratelimit.Decision, ttl time.Duration) {
	t.Helper()
	ip, acct := d.Results[0], d.Results[1]
	if ip.Token != "" || ip.InFlight || !ip.Allowed {
		t.Fatalf("the address' rule: %+v; want it to admit, with no place", ip)
	}
	if d.Allowed {
		if !acct.Allowed || acct.InFlight || acct.Locked {
			t.Fatalf("admitted: %+v", d)
		}
		return
	}
	if acct.Allowed || !acct.InFlight || acct.Locked || acct.Token != "" || acct.RetryAfter <= 0 || acct.RetryAfter > ttl ||
		d.RetryAfter != acct.RetryAfter {
		t.Fatalf("refused: %+v; want refused by the attempts in flight alone, retry-after in (0, %v], no token", d, ttl)
	}
}

// casePlacesWithTheDecision: however many sign-ins are decided at once,
// exactly the threshold's number are admitted, each with a place of its
// own, and those the places refuse count in no rule; a place given back
// or a failure counted moves the count as BeginAttempt's places do; a
// lock refuses as locked, not as in flight.
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
			if d.Allowed {
				tok := d.Results[1].Token
				if tok == "" || tokens[tok] {
					t.Fatalf("admitted %+v; want a token of its own", d)
				}
				tokens[tok] = true
				in = append(in, d)
			}
		}
		if len(in) != p.Threshold {
			t.Fatalf("40 sign-ins decided at once: %d admitted; want the threshold, %d", len(in), p.Threshold)
		}
		// The refused ones counted in no rule: the next admission is the
		// threshold's plus one in both logs.
		endOne(t, s, name, id, in[0].Results[1].Token)
		next := decidePlaced(t, s, ip, id, "", ttl)
		if !next.Allowed || next.Results[0].Count != p.Threshold+1 || next.Results[1].Count != p.Threshold+1 {
			t.Fatalf("once a place is given back: %+v; want admitted, %d in each log", next, p.Threshold+1)
		}
		// A failure counted, its place given back: 1 failure and the
		// threshold's less one in flight.
		failWith(t, s, name, id, "guess 1")
		endOne(t, s, name, id, in[1].Results[1].Token)
		if d := decidePlaced(t, s, ip, id, "", ttl); d.Allowed {
			t.Fatalf("1 failure and %d in flight, threshold %d: %+v; want refused", p.Threshold-1, p.Threshold, d)
		}
		// A place begun alone and one taken with a decision count as one.
		endOne(t, s, name, id, in[2].Results[1].Token)
		if b := beginOne(t, s, name, id, ttl); !b.Allowed {
			t.Fatalf("1 failure and 1 in flight: BeginAttempt %+v; want allowed", b)
		}
		if d := decidePlaced(t, s, ip, id, "", ttl); d.Allowed {
			t.Fatalf("1 failure, a place begun and one decided: %+v; want refused", d)
		}
		// Locked: refused as locked, whatever is in flight.
		lockNow(t, s, name, fmt.Sprintf("locked-%s", id), p.Threshold)
		d := decide(t, s, placed(ip, fmt.Sprintf("locked-%s", id), "", ttl)...)
		if r := d.Results[1]; d.Allowed || !r.Locked || r.InFlight || r.Token != "" {
			t.Fatalf("a locked account: %+v; want refused as locked", d)
		}
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
		if r := d.Results[0]; d.Allowed != (i < p.Threshold-1) {
			t.Fatalf("place %d, after 1 failure, threshold %d: %+v", i+1, p.Threshold, d)
		} else if d.Allowed {
			if r.Token == "" || r.Count != 0 {
				t.Fatalf("a lock-only rule's place: %+v; want a token, no count", r)
			}
			tokens = append(tokens, r.Token)
		} else if !r.InFlight || r.Locked || r.RetryAfter <= 0 || r.RetryAfter > ttl {
			t.Fatalf("places taken: %+v; want refused as in flight", r)
		}
	}
	for range 3 {
		d := decide(t, s, rule("an old password"))
		if !d.Allowed || d.Results[0].Token != "" {
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
