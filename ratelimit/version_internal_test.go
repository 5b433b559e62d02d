package ratelimit

import "testing"

func TestOlder(t *testing.T) {
	for _, c := range []struct {
		v, min string
		want   bool
	}{
		{"6.0.6", "6.0.6", false},
		{"6.0.5", "6.0.6", true},
		{"6.0.10", "6.0.6", false},
		{"5.9.99", "6.0.6", true},
		{"7.0.15", "6.0.6", false},
		{"6.2", "6.0.6", false},
		{"6", "6.0.6", true},
		{"7.2-rc1", "6.0.6", false},
		{"255.255.255", "6.0.6", false},
	} {
		if got := older(c.v, c.min); got != c.want {
			t.Errorf("older(%q, %q) = %v, want %v", c.v, c.min, got, c.want)
		}
	}
}

func TestInfoField(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n"
	if v, ok := infoField(info, "redis_version"); !ok || v != "7.0.15" {
		t.Errorf("redis_version = %q, %v; want 7.0.15", v, ok)
	}
	if _, ok := infoField(info, "redis_mode"); ok {
		t.Error("found a field the reply does not have")
	}
}
