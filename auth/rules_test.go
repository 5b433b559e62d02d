package auth

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// TestRulesTable: the table passes its own check, which NewService makes too.
func TestRulesTable(t *testing.T) {
	if err := checkRules(rules); err != nil {
		t.Fatal(err)
	}
}

// TestCheckRulesFindsFaults plants each fault checkRules is for in a copy
// of the table and wants it found.
func TestCheckRulesFindsFaults(t *testing.T) {
	tests := []struct {
		name  string
		plant func(table []RuleSpec) []RuleSpec
		want  string // in the error
	}{
		{"no label", func(tb []RuleSpec) []RuleSpec { tb[0].Label = ""; return tb }, "label"},
		{"label taken", func(tb []RuleSpec) []RuleSpec { tb[1].Label = tb[0].Label; return tb }, "label"},
		{"lockout's label", func(tb []RuleSpec) []RuleSpec { tb[1].Label = lockoutLabel; return tb }, "label"},
		{"name taken", func(tb []RuleSpec) []RuleSpec { tb[1].Name = tb[0].Name; return tb }, "name taken"},
		{"lockout's name", func(tb []RuleSpec) []RuleSpec { tb[1].Name = RuleLockout; return tb }, "name taken"},
		{"bad name", func(tb []RuleSpec) []RuleSpec { tb[0].Name = "Login-IP"; return tb }, "[a-z0-9_]"},
		{"long name", func(tb []RuleSpec) []RuleSpec { tb[0].Name = strings.Repeat("a", 33); return tb }, "[a-z0-9_]"},
		{"no flow", func(tb []RuleSpec) []RuleSpec { tb[0].Flow = ""; return tb }, "flow"},
		{"no key", func(tb []RuleSpec) []RuleSpec { tb[0].Key = Key{}; return tb }, "no key"},
		{"IPv4 prefix too long", func(tb []RuleSpec) []RuleSpec { tb[0].Key = KeyNetwork(33, 64); return tb }, "bits"},
		{"IPv6 prefix of zero", func(tb []RuleSpec) []RuleSpec { tb[0].Key = KeyNetwork(24, 0); return tb }, "bits"},
		{"no default", func(tb []RuleSpec) []RuleSpec { tb[0].Default = ratelimit.Limit{}; return tb }, "default"},
		{"default out of bounds", func(tb []RuleSpec) []RuleSpec { tb[0].Default.Count = ratelimit.MaxCount + 1; return tb }, "default"},
		{"no setting's usage", func(tb []RuleSpec) []RuleSpec { tb[0].Usage = ""; return tb }, "Usage"},
		{"no README text", func(tb []RuleSpec) []RuleSpec { tb[0].Doc = ""; return tb }, "Doc"},
		{"shares an unknown limit", func(tb []RuleSpec) []RuleSpec {
			return append(tb, RuleSpec{Name: "x_ip", Label: "X", Flow: FlowSignIn, Key: KeyNetwork(24, 48), SharesLimit: "nope"})
		}, "shares the limit"},
		{"shares a shared limit", func(tb []RuleSpec) []RuleSpec {
			return append(tb, RuleSpec{Name: "x_ip", Label: "X", Flow: FlowSignIn, Key: KeyNetwork(24, 48), SharesLimit: RuleUnlockConfirmIP})
		}, "shares the limit"},
		{"shares and has a default", func(tb []RuleSpec) []RuleSpec {
			return append(tb, RuleSpec{Name: "x_ip", Label: "X", Flow: FlowSignIn, Key: KeyNetwork(24, 48), SharesLimit: RuleLoginIP,
				Default: ratelimit.Limit{Count: 1, Window: time.Minute}})
		}, "no default or setting"},
		{"lock-only and not lockable", func(tb []RuleSpec) []RuleSpec {
			return append(tb, RuleSpec{Name: "x_ip", Label: "X", Flow: FlowSignIn, Key: KeyNetwork(24, 48), LockOnly: true})
		}, "lock-only"},
		{"lock-only with a default", func(tb []RuleSpec) []RuleSpec {
			return append(tb, RuleSpec{Name: "x_ip", Label: "X", Flow: FlowSignIn, Key: KeyNetwork(24, 48), LockOnly: true, Lockable: true,
				Default: ratelimit.Limit{Count: 1, Window: time.Minute}, Usage: "x", Doc: "X."})
		}, "lock-only"},
		{"replaces a rule of another flow", func(tb []RuleSpec) []RuleSpec {
			return append(tb, RuleSpec{Name: "x_ip", Label: "X", Flow: FlowSignIn, Key: KeyNetwork(24, 48), Replaces: RuleResetIP,
				Default: ratelimit.Limit{Count: 1, Window: time.Minute}, Usage: "x", Doc: "X."})
		}, "replaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkRules(tt.plant(slices.Clone(rules)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("checkRules = %v, want an error about %q", err, tt.want)
			}
		})
	}
}

// TestTodaysRules pins every rule that existed before the table to what it
// was: its name, label, flow, key, default, lockability and whether the
// dashboard always lists it. Rules added later have tests of their own.
func TestTodaysRules(t *testing.T) {
	limit := func(n int, w time.Duration) ratelimit.Limit { return ratelimit.Limit{Count: n, Window: w} }
	want := []RuleSpec{
		{Name: "login_ip", Label: "Sign-ins per address", Flow: FlowSignIn, Key: KeyNetwork(32, 64), Default: limit(50, 10*time.Minute), Listed: true},
		{Name: "login_account", Label: "Sign-ins per account", Flow: FlowSignIn, Key: KeyAccount, Default: limit(10, 10*time.Minute), Lockable: true, Listed: true},
		{Name: "login_device", Label: "Sign-ins per device", Flow: FlowSignIn, Key: KeyDevice, Default: limit(10, 10*time.Minute), Lockable: true, Replaces: "login_account", Listed: true},
		{Name: "reset_ip", Label: "Reset requests per address", Flow: FlowResetRequest, Key: KeyNetwork(32, 64), Default: limit(5, 10*time.Minute), Listed: true},
		{Name: "reset_account", Label: "Reset requests per account", Flow: FlowResetRequest, Key: KeyAccount, Default: limit(3, time.Hour), Listed: true},
		{Name: "reset_confirm_ip", Label: "Reset confirmations per address", Flow: FlowResetConfirm, Key: KeyNetwork(32, 64), Default: limit(20, 10*time.Minute), Listed: true},
		{Name: "reset_domain", Label: "Reset and unlock mails per domain", Flow: FlowLinkMail, Key: KeyDomain, Default: limit(60, time.Minute)},
		{Name: "unlock_ip", Label: "Unlock-link requests per address", Flow: FlowUnlockRequest, Key: KeyNetwork(32, 64), Default: limit(5, 10*time.Minute)},
		{Name: "unlock_account", Label: "Unlock-link requests per account", Flow: FlowUnlockRequest, Key: KeyAccount, Default: limit(3, time.Hour)},
		{Name: "unlock_confirm_ip", Label: "Unlock-link confirmations per address", Flow: FlowUnlockConfirm, Key: KeyNetwork(32, 64), SharesLimit: "reset_confirm_ip"},
	}
	var names []string
	for _, w := range want {
		names = append(names, w.Name)
		got, ok := LookupRule(w.Name)
		if !ok {
			t.Errorf("no rule %s", w.Name)
			continue
		}
		got.Usage, got.Doc = "", "" // their settings' test checks them against README
		if got != w {
			t.Errorf("rule %s:\n got %+v\nwant %+v", w.Name, got, w)
		}
	}
	var order []string
	for _, r := range rules {
		if slices.Contains(names, r.Name) {
			order = append(order, r.Name)
		}
	}
	if !slices.Equal(order, names) {
		t.Errorf("today's rules are in the order %v, want %v (the settings' order in --help)", order, names)
	}

	// The dashboard's rows and the stats JSON's keys, in their order.
	today := []string{"login_ip", "login_account", "login_device", "lockout", "reset_ip", "reset_account", "reset_confirm_ip"}
	got := slices.DeleteFunc(RejectionRules(), func(r string) bool { return !slices.Contains(today, r) })
	if !slices.Equal(got, today) {
		t.Errorf("RejectionRules() keeps today's rules as %v, want %v", got, today)
	}
	if got := RuleLabel(RuleLockout); got != "Account lockout" {
		t.Errorf("RuleLabel(lockout) = %q, want %q", got, "Account lockout")
	}
}

// TestEverythingReadsTheTable: the defaults, the dashboard's labels, lists
// and sign-in totals agree with the table for every rule in it.
func TestEverythingReadsTheTable(t *testing.T) {
	defaults := DefaultConfig().Limits
	if err := defaults.Validate(); err != nil {
		t.Errorf("DefaultConfig().Limits: %v", err)
	}
	own := 0
	for _, r := range rules {
		if got := RuleLabel(r.Name); got == "" || got != r.Label {
			t.Errorf("RuleLabel(%s) = %q, want %q", r.Name, got, r.Label)
		}
		if r.OwnLimit() {
			own++
			if got, ok := defaults[r.Name]; !ok || got != r.Default {
				t.Errorf("default limit of %s = %v (present %v), want %v", r.Name, got, ok, r.Default)
			}
		} else if _, ok := defaults[r.Name]; ok {
			t.Errorf("default limits have one for %s, which shares %s's", r.Name, r.SharesLimit)
		}
		if r.LockOnly {
			if got := defaults.Of(r.Name); got != (ratelimit.Limit{}) {
				t.Errorf("Limits.Of(%s) = %v, want none: the rule is lock-only", r.Name, got)
			}
		} else if got := defaults.Of(r.Name); got.Validate() != nil {
			t.Errorf("Limits.Of(%s) = %v, not a valid limit", r.Name, got)
		}
		signIn := r.Flow == FlowSignIn
		if IsSignInRule(r.Name) != signIn || slices.Contains(SignInRules(), r.Name) != signIn {
			t.Errorf("rule %s of flow %q: IsSignInRule = %v, in SignInRules = %v; want %v (the dashboard's sign-in total)",
				r.Name, r.Flow, IsSignInRule(r.Name), slices.Contains(SignInRules(), r.Name), signIn)
		}
		if slices.Contains(RejectionRules(), r.Name) != r.Listed {
			t.Errorf("rule %s: in RejectionRules = %v, want Listed = %v", r.Name, !r.Listed, r.Listed)
		}
	}
	if len(defaults) != own {
		t.Errorf("default limits name %d rules, want the table's %d with limits of their own: %v", len(defaults), own, defaults)
	}
	if !IsSignInRule(RuleLockout) || !slices.Contains(RejectionRules(), RuleLockout) {
		t.Errorf("the lockout is not counted as a sign-in rejection on the dashboard")
	}
	// Sign-in rules come first on the dashboard, the lockout last of them.
	rr := RejectionRules()
	i := slices.Index(rr, RuleLockout)
	for _, r := range rr[:i] {
		if !IsSignInRule(r) {
			t.Errorf("RejectionRules() = %v: %s before the lockout is no sign-in rule", rr, r)
		}
	}
	for _, r := range rr[i+1:] {
		if IsSignInRule(r) {
			t.Errorf("RejectionRules() = %v: sign-in rule %s after the lockout", rr, r)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name  string
		plant func(Limits)
		want  string // "" for valid
	}{
		{"defaults", func(Limits) {}, ""},
		{"count changed", func(l Limits) { l.SetCount(RuleLoginIP, 1000) }, ""},
		{"count zero", func(l Limits) { l.SetCount(RuleLoginIP, 0) }, "limit login_ip:"},
		{"missing", func(l Limits) { delete(l, RuleResetDomain) }, "limit reset_domain: missing"},
		{"unknown name", func(l Limits) { l["login_ipp"] = l[RuleLoginIP] }, `"login_ipp"`},
		{"a shared limit's own", func(l Limits) { l[RuleUnlockConfirmIP] = l[RuleResetConfirmIP] }, `"unlock_confirm_ip"`},
		{"a lock-only rule's", func(l Limits) { l[RuleLoginPassword] = ratelimit.PerMinute(1) }, `"login_password"`},
		{"new rule by SetCount", func(l Limits) { l.SetCount("nope", 3) }, `"nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := DefaultLimits()
			tt.plant(l)
			err := l.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSetCountKeepsWindow(t *testing.T) {
	l := DefaultLimits()
	l.SetCount(RuleResetAccount, 7)
	if got, want := l[RuleResetAccount], (ratelimit.Limit{Count: 7, Window: time.Hour}); got != want {
		t.Errorf("after SetCount: %v, want %v", got, want)
	}
}

// todaysRules are the rules that existed before the table.
var todaysRules = []string{"login_ip", "login_account", "login_device", "reset_ip", "reset_account",
	"reset_confirm_ip", "reset_domain", "unlock_ip", "unlock_account", "unlock_confirm_ip"}

// TestRulesFor: each flow decides the rules it decided before the table,
// with the same identities and limits, in the same order.
func TestRulesFor(t *testing.T) {
	l := DefaultLimits()
	l.SetCount(RuleResetConfirmIP, 7)
	v4 := Client{Addr: netip.MustParseAddr("192.0.2.1")}
	v6 := Client{Addr: netip.MustParseAddr("2001:db8:1:2:3:4:5:6")}
	rule := func(name, id string, lockable bool) ratelimit.Rule {
		return ratelimit.Rule{Name: name, ID: id, Limit: l.Of(name), Lockable: lockable}
	}
	tests := []struct {
		name string
		flow Flow
		sub  Subject
		want []ratelimit.Rule
	}{
		{"sign-in", FlowSignIn, Subject{Client: v4, Account: "ann@example.com"},
			[]ratelimit.Rule{rule(RuleLoginIP, "192.0.2.1", false), rule(RuleLoginAccount, "ann@example.com", true)}},
		{"sign-in from a known device", FlowSignIn, Subject{Client: v6, Account: "ann@example.com", Device: "nonce"},
			[]ratelimit.Rule{rule(RuleLoginIP, "2001:db8:1:2::/64", false), rule(RuleLoginDevice, "nonce", true)}},
		{"malformed sign-in", FlowSignIn, Subject{Client: v4},
			[]ratelimit.Rule{rule(RuleLoginIP, "192.0.2.1", false)}},
		{"sign-in without an address", FlowSignIn, Subject{Account: "ann@example.com"},
			[]ratelimit.Rule{rule(RuleLoginIP, "unknown", false), rule(RuleLoginAccount, "ann@example.com", true)}},
		{"reset request", FlowResetRequest, Subject{Client: v4, Account: "ann@example.com"},
			[]ratelimit.Rule{rule(RuleResetIP, "192.0.2.1", false), rule(RuleResetAccount, "ann@example.com", false)}},
		{"reset confirmation", FlowResetConfirm, Subject{Client: v4},
			[]ratelimit.Rule{rule(RuleResetConfirmIP, "192.0.2.1", false)}},
		{"unlock-link request", FlowUnlockRequest, Subject{Client: v4, Account: "ann@example.com"},
			[]ratelimit.Rule{rule(RuleUnlockIP, "192.0.2.1", false), rule(RuleUnlockAccount, "ann@example.com", false)}},
		{"unlock-link confirmation", FlowUnlockConfirm, Subject{Client: v4},
			[]ratelimit.Rule{{Name: RuleUnlockConfirmIP, ID: "192.0.2.1", Limit: ratelimit.Limit{Count: 7, Window: 10 * time.Minute}}}},
		{"link mail", FlowLinkMail, Subject{Domain: "example.com"},
			[]ratelimit.Rule{rule(RuleResetDomain, "example.com", false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Rules added since have tests of their own.
			got := slices.DeleteFunc(bookOf(l).rulesFor(tt.flow, tt.sub), func(r ratelimit.Rule) bool {
				return !slices.Contains(todaysRules, r.Name)
			})
			if !slices.Equal(got, tt.want) {
				t.Errorf("rulesFor(%q) =\n %+v\nwant\n %+v", tt.flow, got, tt.want)
			}
		})
	}
}

// TestKeyNetwork: a network key masks the client's address to its prefix;
// the /32 and /64 keys name networks as Client.Source does.
func TestKeyNetwork(t *testing.T) {
	tests := []struct {
		name   string
		key    Key
		addr   netip.Addr
		wantID string
	}{
		{"IPv4", KeyNetwork(32, 64), netip.MustParseAddr("203.0.113.9"), "203.0.113.9"},
		{"mapped IPv4", KeyNetwork(32, 64), netip.MustParseAddr("::ffff:203.0.113.9"), "203.0.113.9"},
		{"IPv6", KeyNetwork(32, 64), netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64"},
		{"IPv6 with zone", KeyNetwork(32, 64), netip.MustParseAddr("fe80::1:2%eth0"), "fe80::/64"},
		{"no address", KeyNetwork(32, 64), netip.Addr{}, "unknown"},
		{"IPv4 /24", KeyNetwork(24, 48), netip.MustParseAddr("203.0.113.9"), "203.0.113.0/24"},
		{"mapped IPv4 /24", KeyNetwork(24, 48), netip.MustParseAddr("::ffff:203.0.113.9"), "203.0.113.0/24"},
		{"IPv6 /48", KeyNetwork(24, 48), netip.MustParseAddr("2001:db8:1:2::1"), "2001:db8:1::/48"},
		{"IPv6 /56", KeyNetwork(24, 56), netip.MustParseAddr("2001:db8:1:2ff::1"), "2001:db8:1:200::/56"},
		{"NAT64 IPv4", KeyNetwork(32, 64), netip.MustParseAddr("64:ff9b::203.0.113.9"), "203.0.113.9"},
		{"NAT64 IPv4 /24", KeyNetwork(24, 56), netip.MustParseAddr("64:ff9b::203.0.113.9"), "203.0.113.0/24"},
		{"6to4 /64", KeyNetwork(32, 64), netip.MustParseAddr("2002:cb00:7109:1::5"), "2002:cb00:7109:1::/64"},
		{"6to4 /56", KeyNetwork(24, 56), netip.MustParseAddr("2002:cb00:7109:1::5"), "2002:cb00:7109::/56"},
		{"near NAT64 prefix", KeyNetwork(32, 64), netip.MustParseAddr("64:ff9b:1::203.0.113.9"), "64:ff9b:1::/64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Client{Addr: tt.addr}
			id, ok := tt.key.ID(Subject{Client: c})
			if id != tt.wantID || !ok {
				t.Errorf("%v.ID(%v) = %q, %v; want %q, true", tt.key, tt.addr, id, ok, tt.wantID)
			}
			if tt.key == KeyNetwork(32, 64) && c.Source() != tt.wantID {
				t.Errorf("Client{%v}.Source() = %q, want %q", tt.addr, c.Source(), tt.wantID)
			}
		})
	}
}

// TestKeyNetworkGroups: addresses of one network share an identity, and
// neighbouring networks do not.
func TestKeyNetworkGroups(t *testing.T) {
	tests := []struct {
		name string
		key  Key
		a, b string
		same bool
	}{
		{"same IPv6 /64", KeyNetwork(32, 64), "2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", true},
		{"neighbouring IPv6 /64", KeyNetwork(32, 64), "2001:db8:1:2::1", "2001:db8:1:3::1", false},
		{"same IPv4", KeyNetwork(32, 64), "203.0.113.9", "::ffff:203.0.113.9", true},
		{"neighbouring IPv4", KeyNetwork(32, 64), "203.0.113.9", "203.0.113.10", false},
		{"IPv4 and IPv6", KeyNetwork(32, 64), "0.0.0.0", "::", false},
		{"same IPv4 /24", KeyNetwork(24, 48), "203.0.113.9", "203.0.113.250", true},
		{"neighbouring IPv4 /24", KeyNetwork(24, 48), "203.0.113.9", "203.0.114.9", false},
		{"same IPv6 /48", KeyNetwork(24, 48), "2001:db8:1:2::1", "2001:db8:1:ffff::1", true},
		// An IPv4 client behind a translator is that IPv4 address: two
		// of them are two clients, and one of them is the client it is
		// over IPv4.
		{"NAT64 clients apart", KeyNetwork(32, 64), "64:ff9b::203.0.113.9", "64:ff9b::198.51.100.7", false},
		{"NAT64 client and its IPv4", KeyNetwork(32, 64), "64:ff9b::203.0.113.9", "203.0.113.9", true},
		{"NAT64 clients apart /24", KeyNetwork(24, 56), "64:ff9b::203.0.113.9", "64:ff9b::198.51.100.7", false},
		// A 6to4 address is an IPv6 site's like any other: whichever 6to4
		// relay XCloak's network routes 2002::/16 to receives the answers,
		// so it could send from any of them and would spend the limits of
		// the IPv4 address and /24 it named, were they that address's.
		{"6to4 site and its IPv4", KeyNetwork(32, 64), "2002:cb00:7109::1", "203.0.113.9", false},
		{"6to4 site and its IPv4 /24", KeyNetwork(24, 56), "2002:cb00:7109::1", "203.0.113.9", false},
		{"6to4 site's /64", KeyNetwork(32, 64), "2002:cb00:7109::1", "2002:cb00:7109::2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := tt.key.ID(Subject{Client: Client{Addr: netip.MustParseAddr(tt.a)}})
			b, _ := tt.key.ID(Subject{Client: Client{Addr: netip.MustParseAddr(tt.b)}})
			if got := a == b; got != tt.same {
				t.Errorf("%v: %s is %q, %s is %q: equal = %v, want %v", tt.key, tt.a, a, tt.b, b, got, tt.same)
			}
		})
	}
}

// TestKeysWithoutIdentity: a rule keyed by what a request lacks does not
// apply to it, but a network key always does.
func TestKeysWithoutIdentity(t *testing.T) {
	for _, k := range []Key{KeyAccount, KeyDevice, KeyDomain, KeyAccountNetwork(32, 64), {}} {
		if id, ok := k.ID(Subject{Client: Client{Addr: netip.MustParseAddr("192.0.2.1")}}); ok {
			t.Errorf("%v.ID of a request without one = %q, true; want false", k, id)
		}
	}
	if id, ok := KeyNetwork(32, 64).ID(Subject{}); !ok || id != "unknown" {
		t.Errorf("network key of a request without an address = %q, %v; want \"unknown\", true", id, ok)
	}
}

// TestKeyAccountNetwork: one account from one network is one identity;
// another account behind the same address, or the same account from
// another network, another.
func TestKeyAccountNetwork(t *testing.T) {
	k := KeyAccountNetwork(32, 64)
	id := func(account, addr string) string {
		id, ok := k.ID(Subject{Account: account, Client: Client{Addr: netip.MustParseAddr(addr)}})
		if !ok {
			t.Fatalf("%s from %s: no identity", account, addr)
		}
		return id
	}
	ann := id("ann@example.com", "2001:db8::1")
	if got := id("ann@example.com", "2001:db8::2"); got != ann {
		t.Errorf("ann from the same /64: %q, want %q", got, ann)
	}
	for _, other := range []string{id("mallory@example.com", "2001:db8::1"), id("ann@example.com", "2001:db8:1::1")} {
		if other == ann {
			t.Errorf("%q is ann's own identity from her network", other)
		}
	}
}

// TestRulesForAllocations: the rules of a sign-in, built for every one
// before its decision (rejected ones included), cost one slice and the
// names of the client's networks, nothing for the table's walk.
func TestRulesForAllocations(t *testing.T) {
	l := DefaultLimits()
	sub := Subject{Client: Client{Addr: netip.MustParseAddr("192.0.2.1")}, Account: "ann@example.com", Password: "spraykey"}
	// The slice, "192.0.2.1" and "192.0.2.0/24".
	const want = 3
	b := bookOf(l)
	if n := testing.AllocsPerRun(100, func() { b.rulesFor(FlowSignIn, sub) }); n > want {
		t.Errorf("rulesFor(sign-in): %v allocations, want %d", n, want)
	}
}

// TestLoginPasswordIsLockOnly: a sign-in's password rule is decided by its
// lock alone (the spraying verdict), so that the decision keeps no log of
// every password tried; the sign-in's other rules keep their limits.
func TestLoginPasswordIsLockOnly(t *testing.T) {
	s := Subject{Client: Client{Addr: netip.MustParseAddr("192.0.2.1")}, Account: "ann@example.com", Password: "spray-key"}
	got := bookOf(DefaultLimits()).rulesFor(FlowSignIn, s)
	seen := false
	for _, r := range got {
		if r.Name == RuleLoginPassword {
			seen = true
			if !r.LockOnly() || r.ID != s.Password {
				t.Errorf("sign-in rule %s = %+v, want lock-only, keyed by the password", r.Name, r)
			}
			continue
		}
		if r.LockOnly() || r.Limit.Validate() != nil {
			t.Errorf("sign-in rule %s = %+v, want a limit of its own", r.Name, r)
		}
	}
	if !seen {
		t.Fatalf("sign-in rules %+v: no %s", got, RuleLoginPassword)
	}
	if _, ok := DefaultLimits()[RuleLoginPassword]; ok {
		t.Errorf("default limits have one for %s, a lock-only rule", RuleLoginPassword)
	}
}

// TestSiteRungs: the flows whose /64 rule guards a request anyone may
// make without a session, and which stores or looks something up, have
// an IPv6 /48 rung in the same decision, as sign-ins and reset requests
// do: keyed by the /48, not applied to IPv4 clients, its default limit
// the siblings' multiple of the /64's, over the same window.
func TestSiteRungs(t *testing.T) {
	l := DefaultLimits()
	v4 := Subject{Client: Client{Addr: netip.MustParseAddr("192.0.2.1")}}
	v6 := Subject{Client: Client{Addr: netip.MustParseAddr("2001:db8:1:2:3:4:5:6")}}
	// Sign-ins' and reset requests' /48 rungs admit 40 times their /64's.
	for _, tc := range []struct{ site, own string }{{RuleLoginSite, RuleLoginIP}, {RuleResetSite, RuleResetIP}} {
		if l[tc.site].Count != 40*l[tc.own].Count || l[tc.site].Window != l[tc.own].Window {
			t.Fatalf("%s is %v and %s %v: the multiple this test holds the new rungs to has changed", tc.site, l[tc.site], tc.own, l[tc.own])
		}
	}
	for _, tc := range []struct {
		flow      Flow
		own, site string
	}{
		{FlowPasskeyBegin, RulePasskeyOptionsIP, RulePasskeyOptionsSite},
		{FlowSecondStep, RuleMFANetwork, RuleMFASite},
	} {
		t.Run(string(tc.flow), func(t *testing.T) {
			want := ratelimit.Limit{Count: 40 * l[tc.own].Count, Window: l[tc.own].Window}
			if l[tc.site] != want {
				t.Errorf("default of %s = %v, want %v (40 times %s's, as the other /48 rungs)", tc.site, l[tc.site], want, tc.own)
			}
			names := func(rs []ratelimit.Rule) map[string]ratelimit.Rule {
				m := map[string]ratelimit.Rule{}
				for _, r := range rs {
					m[r.Name] = r
				}
				return m
			}
			got := names(bookOf(l).rulesFor(tc.flow, v6))
			if r, ok := got[tc.site]; !ok || r.ID != "2001:db8:1::/48" || r.Limit != want || r.Lockable {
				t.Errorf("rulesFor(%q) of an IPv6 client: %s = %+v (present %v), want the /48 2001:db8:1::/48, limit %v, no lock", tc.flow, tc.site, r, ok, want)
			}
			if r, ok := got[tc.own]; !ok || r.ID != "2001:db8:1:2::/64" {
				t.Errorf("rulesFor(%q) of an IPv6 client: %s = %+v (present %v), want its /64", tc.flow, tc.own, r, ok)
			}
			got = names(bookOf(l).rulesFor(tc.flow, v4))
			if r, ok := got[tc.site]; ok {
				t.Errorf("rulesFor(%q) of an IPv4 client has %+v: the /48 rung has no IPv4 counterpart", tc.flow, r)
			}
		})
	}
}
