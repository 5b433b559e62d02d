package auth

import "net/netip"

// nat64Prefix is NAT64's and SIIT's well-known prefix (RFC 6052), the
// IPv4 address in its last 32 bits: an IPv6-only deployment's translator
// presents IPv4 clients from it. Counted by their IPv6 form, every IPv4
// client behind the translator would share one /64, and one attacker's
// failures would refuse them all. Answers to it go to the translator that
// XCloak's network (or its provider's, by agreement: RFC 6052 keeps the
// prefix out of the Internet's routes otherwise) routes it to, which
// sends them on to the IPv4 address.
//
// 6to4's 2002::/16 (RFC 3056), which embeds an IPv4 address too, is not
// read so: answers to it go to whichever 6to4 relay announces 2002::/16
// nearest XCloak, and anyone with a network of their own may announce it
// (RFC 3964, RFC 7526). Such a relay could send from any 2002:V4ADDR::/48
// and, were it V4ADDR, spend that address's and its /24's limits and have
// its users refused. A 6to4 site is counted as the IPv6 site it is.
var nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")

// WellKnownNAT64 is NAT64's well-known prefix, 64:ff9b::/96, whose
// addresses CountedAddr reads as the IPv4 address they embed.
func WellKnownNAT64() netip.Prefix { return nat64Prefix }

// CountedAddr is the address the limits, events and attack detection
// count a client by: addr without its zone, and the IPv4 address an IPv6
// address stands for when it is IPv4-mapped (::ffff:192.0.2.1) or of
// NAT64's well-known prefix (64:ff9b::192.0.2.1). Other addresses, 6to4's
// among them, and the zero Addr, are returned as they are.
func CountedAddr(addr netip.Addr) netip.Addr {
	addr = addr.Unmap().WithZone("")
	if v4, ok := TranslatedIPv4(addr, nat64Prefix); ok {
		return v4
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
