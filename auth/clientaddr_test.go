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
