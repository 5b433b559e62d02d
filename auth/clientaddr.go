package auth

import "net/netip"

// The IPv6 prefixes that stand for an IPv4 address: an IPv4 client that
// reaches XCloak through them is that IPv4 address. Counted by its IPv6
// form instead, every IPv4 client behind a translator would share one
// /64 (one attacker's failures would refuse them all), and the holder of
// one IPv4 address would have a 6to4 /48 of /64s to rotate through, each
// with a limit of its own, beside the address's. Neither can be claimed
// by anyone else: answers to them are routed to the IPv4 address itself.
var (
	// nat64Prefix is NAT64's and SIIT's well-known prefix (RFC 6052),
	// the IPv4 address in its last 32 bits: an IPv6-only deployment's
	// translator presents IPv4 clients from it.
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	// sixToFourPrefix is 6to4's (RFC 3056): 2002:V4ADDR::/48 is the site
	// of the host at V4ADDR.
	sixToFourPrefix = netip.MustParsePrefix("2002::/16")
)

// CountedAddr is the address the limits, events and attack detection
// count a client by: addr without its zone, and the IPv4 address an IPv6
// address stands for when it is IPv4-mapped (::ffff:192.0.2.1), of NAT64's
// well-known prefix (64:ff9b::192.0.2.1) or 6to4 (2002:c000:201::/48).
// Other addresses, and the zero Addr, are returned as they are.
func CountedAddr(addr netip.Addr) netip.Addr {
	addr = addr.Unmap().WithZone("")
	if !addr.Is6() {
		return addr
	}
	if v4, ok := TranslatedIPv4(addr, nat64Prefix); ok {
		return v4
	}
	if sixToFourPrefix.Contains(addr) {
		b := addr.As16()
		return netip.AddrFrom4([4]byte(b[2:6]))
	}
	return addr
}

// TranslatedIPv4 returns the IPv4 address that addr embeds, when addr is
// in prefix, a translator's IPv4-embedding prefix (NAT64 or SIIT, RFC
// 6052), and true. Such a prefix is 32, 40, 48, 56, 64 or 96 bits long;
// the IPv4 address follows it, around bits 64 to 71, which are zero (an
// address where they are not is a host of that network, and false is
// returned for it, as for any other prefix length and any address
// outside the prefix).
func TranslatedIPv4(addr netip.Addr, prefix netip.Prefix) (netip.Addr, bool) {
	bits := prefix.Bits()
	switch {
	case bits != 32 && bits != 40 && bits != 48 && bits != 56 && bits != 64 && bits != 96,
		!addr.Is6() || addr.Is4In6() || !prefix.Contains(addr):
		return netip.Addr{}, false
	}
	b := addr.As16()
	if b[8] != 0 {
		return netip.Addr{}, false
	}
	var v4 [4]byte
	at := bits / 8
	for i := range v4 {
		if at == 8 {
			at++ // bits 64 to 71
		}
		v4[i] = b[at]
		at++
	}
	return netip.AddrFrom4(v4), true
}
