package ratelimit

import (
	"slices"
	"testing"
)

// TestLimiterKeys checks that the keys a decision builds in one
// allocation are those Keys and lockKey build one by one.
func TestLimiterKeys(t *testing.T) {
	l := &Limiter{prefix: "test:"}
	rules := []Rule{
		{Name: "login_ip", ID: "192.0.2.1"},
		{Name: "login_account", ID: "a@example.com", Lockable: true},
		{Name: "login_network", ID: "192.0.2.0/24"},
		{Name: "login_password", ID: "{}:\x00\xff", Lockable: true},
	}
	var want []string
	for _, r := range rules {
		k := Keys{prefix: l.prefix, kind: r.Name}
		want = append(want, k.Log(r.ID))
		if r.Lockable {
			want = append(want, lockKey(k, r.ID))
		}
	}
	got := l.keys(rules)
	if !slices.Equal(got, want) {
		t.Fatalf("keys = %q, want %q", got, want)
	}
	for i, r := range rules {
		if got, want := logKey(rules, got, i), (Keys{prefix: l.prefix, kind: r.Name}).Log(r.ID); got != want {
			t.Errorf("logKey of rule %d = %q, want %q", i, got, want)
		}
	}
}
