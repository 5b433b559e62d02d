package auth_test

import (
	"net/netip"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestTranslatedIPv4 reads the IPv4 address that a translator's address
// embeds, at every prefix length RFC 6052 allows: the examples of its
// section 2.4, 192.0.2.33 each time.
func TestTranslatedIPv4(t *testing.T) {
	v4 := netip.MustParseAddr("192.0.2.33")
	for _, tt := range []struct{ prefix, addr string }{
		{"2001:db8::/32", "2001:db8:c000:221::"},
		{"2001:db8:100::/40", "2001:db8:1c0:2:21::"},
		{"2001:db8:122::/48", "2001:db8:122:c000:2:2100::"},
		{"2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"},
		{"2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"},
		{"2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"},
		{"64:ff9b::/96", "64:ff9b::192.0.2.33"},
	} {
		got, ok := auth.TranslatedIPv4(netip.MustParseAddr(tt.addr), netip.MustParsePrefix(tt.prefix))
		if !ok || got != v4 {
			t.Errorf("TranslatedIPv4(%s, %s) = %v, %v; want %v, true", tt.addr, tt.prefix, got, ok, v4)
		}
	}

	for _, tt := range []struct{ why, prefix, addr string }{
		{"outside the prefix", "2001:db8:122:344::/96", "2001:db8:122:345::192.0.2.33"},
		// Bits 64 to 71 are zero in every address that embeds one: an
		// address with them set is a host of that network, not a client
		// the translator presents.
		{"bits 64 to 71 set", "2001:db8:122::/48", "2001:db8:122:c000:ff02:2100::"},
		{"an IPv4 address", "2001:db8::/32", "192.0.2.33"},
		{"a length RFC 6052 does not define", "2001:db8:122:344::/80", "2001:db8:122:344::c000:221"},
		{"a /96 that sets bits 64 to 71", "2001:db8:122:344:ff00::/96", "2001:db8:122:344:ff00::c000:221"},
	} {
		if got, ok := auth.TranslatedIPv4(netip.MustParseAddr(tt.addr), netip.MustParsePrefix(tt.prefix)); ok {
			t.Errorf("%s: TranslatedIPv4(%s, %s) = %v, true; want false", tt.why, tt.addr, tt.prefix, got)
		}
	}
}

// TestCountedAddrTeredo: a Teredo address (RFC 4380,
// 2001:0:SERVER:FLAGS:PORT:CLIENT, the client's port and IPv4 address
// inverted) counts by the client's IPv4 address, the one part a relay
// checks against the packets it carries. Its server's address, which
// made up each address's /64, /56 and /48, is the client's to write: one
// host spread itself over 2^32 networks, and every client of one server
// shared one /64. The example is RFC 4380's: 192.0.2.45, port 40000,
// through the server 65.54.227.120.
func TestCountedAddrTeredo(t *testing.T) {
	client := func(s string) auth.Subject { return auth.Subject{Client: auth.Client{Addr: netip.MustParseAddr(s)}} }
	rfc := client("2001:0:4136:e378:8000:63bf:3fff:fdd2")
	counted := auth.CountedAddr(rfc.Client.Addr)
	if want := netip.MustParseAddr("2001:0:c000:22d::3fff:fdd2"); counted != want {
		t.Errorf("CountedAddr(%s) = %v, want %v", rfc.Client.Addr, counted, want)
	}
	// An address already counted, as an event names it, counts the same.
	if again := auth.CountedAddr(counted); again != counted {
		t.Errorf("CountedAddr(%s) = %v, want it unchanged", counted, again)
	}
	rungs := []auth.Key{auth.KeyNetwork(32, 64), auth.KeyNetwork(24, 56), auth.KeyIPv6Network(48)}
	id := func(k auth.Key, s auth.Subject) string {
		id, ok := k.ID(s)
		if !ok {
			t.Fatalf("%s: no identity for %s", k, s.Client.Addr)
		}
		return id
	}
	for _, other := range []string{
		"2001:0:cb00:7101:8000:63bf:3fff:fdd2", // another server
		"2001:0:ffff:ffff:0:0:3fff:fdd2",       // another server, flags and port
	} {
		for _, k := range rungs {
			if got, want := id(k, client(other)), id(k, rfc); got != want {
				t.Errorf("%s: %s counts as %s, want %s as the same client through 65.54.227.120 does", k, other, got, want)
			}
		}
	}
	// Another client of the same server is another address, in the same
	// /24 the same network.
	neighbour := client("2001:0:4136:e378:8000:63bf:3fff:fdd1") // 192.0.2.46
	if a, b := id(rungs[0], neighbour), id(rungs[0], rfc); a == b {
		t.Errorf("%s: two clients of one server both count as %s", rungs[0], a)
	}
	if a, b := id(rungs[1], neighbour), id(rungs[1], rfc); a != b {
		t.Errorf("%s: clients in one IPv4 /24 count as %s and %s, want one network", rungs[1], a, b)
	}
	// Not read as the IPv4 address itself: a relay anyone may run could
	// then spend any address's limits.
	if got := auth.CountedAddr(rfc.Client.Addr); !got.Is6() {
		t.Errorf("CountedAddr(%s) = %v, want an IPv6 address of Teredo's prefix", rfc.Client.Addr, got)
	}
}
