package ratelimit

import (
	"slices"
	"testing"
)

// TestLimiterKeys checks that the keys a decision builds in one
// allocation are those Keys and lockKey build one by one (a lock-only
// rule's lock alone), and that its packed rules are each rule's
// appendSpec in order, not overwritten by the keys.
func TestLimiterKeys(t *testing.T) {
	l := &Limiter{prefix: "test:"}
	per := PerMinute(1)
	rules := []Rule{
		{Name: "login_ip", ID: "192.0.2.1", Limit: per},
		{Name: "login_account", ID: "a@example.com", Limit: per, Lockable: true},
		{Name: "login_password", ID: "{}:\x00\xff", Lockable: true},
		{Name: "login_network", ID: "192.0.2.0/24", Limit: per},
	}
	var want []string
	for _, r := range rules {
		k := Keys{prefix: l.prefix, kind: r.Name}
		if !r.LockOnly() {
			want = append(want, k.Log(r.ID))
		}
		if r.Lockable {
			want = append(want, lockKey(k, r.ID))
		}
	}
	got, spec := l.input(rules)
	if !slices.Equal(got, want) {
		t.Fatalf("keys = %q, want %q", got, want)
	}
	var wantSpec []byte
	for _, r := range rules {
		wantSpec = appendSpec(wantSpec, r)
	}
	if spec != string(wantSpec) {
		t.Fatalf("spec = %x, want %x", spec, wantSpec)
	}
	for i, r := range rules {
		if r.LockOnly() {
			continue
		}
		if got, want := logKey(rules, got, i), (Keys{prefix: l.prefix, kind: r.Name}).Log(r.ID); got != want {
			t.Errorf("logKey of rule %d = %q, want %q", i, got, want)
		}
	}
}
