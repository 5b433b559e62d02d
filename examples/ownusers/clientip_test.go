package main

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestClientIP(t *testing.T) {
	a := &App{trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	tests := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy", "198.51.100.1:5000", nil, "198.51.100.1"},
		{"an untrusted peer's header is ignored", "198.51.100.1:5000", []string{"203.0.113.9"}, "198.51.100.1"},
		{"a trusted proxy's client", "10.0.0.2:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"what the client prepended is not believed", "10.0.0.2:5000", []string{"1.2.3.4, 203.0.113.9"}, "203.0.113.9"},
		{"through two trusted proxies", "10.0.0.2:5000", []string{"203.0.113.9, 10.0.0.3"}, "203.0.113.9"},
		{"headers given twice are one list", "10.0.0.2:5000", []string{"1.2.3.4", "203.0.113.9"}, "203.0.113.9"},
		{"garbage stops the walk at the last trusted hop", "10.0.0.2:5000", []string{"203.0.113.9, junk, 10.0.0.3"}, "10.0.0.3"},
		{"a trusted proxy without a header", "10.0.0.2:5000", nil, "10.0.0.2"},
		{"IPv6 peer", "[::1]:5000", []string{"2001:db8::7"}, "2001:db8::7"},
		{"an IPv4-mapped peer", "[::ffff:198.51.100.1]:5000", nil, "198.51.100.1"},
		// Some proxies append the client's port too.
		{"an IPv4 hop with a port", "10.0.0.2:5000", []string{"203.0.113.7:4711"}, "203.0.113.7"},
		{"a bracketed IPv6 hop with a port", "10.0.0.2:5000", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"a bracketed IPv6 hop without a port", "10.0.0.2:5000", []string{"[2001:db8::1]"}, "2001:db8::1"},
		{"trusted hops with ports are walked past", "10.0.0.2:5000", []string{"203.0.113.7:4711, 10.0.0.3:80, [::1]:8080"}, "203.0.113.7"},
		{"an obfuscated port", "10.0.0.2:5000", []string{"203.0.113.7:_a1"}, "203.0.113.7"},
		{"an IPv4-mapped hop with a port", "10.0.0.2:5000", []string{"[::ffff:203.0.113.7]:4711"}, "203.0.113.7"},
		{"a hop's zone is dropped", "10.0.0.2:5000", []string{"fe80::1%eth0"}, "fe80::1"},
		{"an untrusted peer's hop with a port is ignored", "198.51.100.1:5000", []string{"203.0.113.7:4711"}, "198.51.100.1"},
		{"an unbracketed IPv6 hop is all address, no port", "10.0.0.2:5000", []string{"2001:db8::1:443, 10.0.0.3"}, "2001:db8::1:443"},
		{"a port out of range is malformed", "10.0.0.2:5000", []string{"203.0.113.7:65536, 10.0.0.3"}, "10.0.0.3"},
		{"an empty port is malformed", "10.0.0.2:5000", []string{"203.0.113.7:, 10.0.0.3"}, "10.0.0.3"},
		{"an IPv4 hop in brackets is malformed", "10.0.0.2:5000", []string{"[203.0.113.7]:80, 10.0.0.3"}, "10.0.0.3"},
		{"a hostname is malformed", "10.0.0.2:5000", []string{"client.example:80, 10.0.0.3"}, "10.0.0.3"},
		{"empty list elements carry nothing", "10.0.0.2:5000", []string{"203.0.113.7, , 10.0.0.3,"}, "203.0.113.7"},
		// The walk is bounded: what a client prepends cannot make each
		// request cost more, and past the bound the last trusted hop stands.
		{"the walk stops after 32 hops", "10.0.0.2:5000", []string{"203.0.113.7, " + strings.Repeat("10.0.0.3, ", 31) + "10.0.0.4"}, "10.0.0.3"},
		{"32 hops are walked", "10.0.0.2:5000", []string{"203.0.113.7, " + strings.Repeat("10.0.0.3, ", 30) + "10.0.0.4"}, "203.0.113.7"},
		{"the walk stops after 4 KiB", "10.0.0.2:5000", []string{"203.0.113.7," + strings.Repeat(" ", 4<<10) + "10.0.0.3, 10.0.0.4"}, "10.0.0.4"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = tt.peer
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := a.clientIP(r); got.String() != tt.want {
			t.Errorf("%s: clientIP = %s, want %s", tt.name, got, tt.want)
		}
	}
}
