package auth

import (
	"net/netip"
	"testing"
)

// TestClientSource: a client is named by its address (IPv4) or its /64
// (IPv6), as limits, events and the dashboard count it.
func TestClientSource(t *testing.T) {
	tests := []struct {
		name string
		addr netip.Addr
		want string
	}{
		{"IPv4", netip.MustParseAddr("203.0.113.9"), "203.0.113.9"},
		{"mapped IPv4", netip.MustParseAddr("::ffff:203.0.113.9"), "203.0.113.9"},
		{"IPv6", netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64"},
		{"IPv6 with zone", netip.MustParseAddr("fe80::1:2%eth0"), "fe80::/64"},
		{"no address", netip.Addr{}, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Client{Addr: tt.addr}).Source(); got != tt.want {
				t.Errorf("Client{%v}.Source() = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}

// TestClientSourceGroups: addresses of one network share a name, and
// neighbouring networks do not.
func TestClientSourceGroups(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"same IPv6 /64", "2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", true},
		{"neighbouring IPv6 /64", "2001:db8:1:2::1", "2001:db8:1:3::1", false},
		{"same IPv4", "203.0.113.9", "::ffff:203.0.113.9", true},
		{"neighbouring IPv4", "203.0.113.9", "203.0.113.10", false},
		{"IPv4 and IPv6", "0.0.0.0", "::", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Client{Addr: netip.MustParseAddr(tt.a)}.Source()
			b := Client{Addr: netip.MustParseAddr(tt.b)}.Source()
			if got := a == b; got != tt.same {
				t.Errorf("%s is %q, %s is %q: equal = %v, want %v", tt.a, a, tt.b, b, got, tt.same)
			}
		})
	}
}
