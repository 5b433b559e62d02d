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

// teredoPrefix is Teredo's (RFC 4380): 2001:0:SERVER:FLAGS:PORT:CLIENT,
// the server's IPv4 address, then flags, and the client's UDP port and
// IPv4 address as its NAT maps them, both inverted. A relay carries a
// client's packets only from the address and port written in its source
// (RFC 4380), and answers go there, not through the
// server: the server's address, the whole of the /64, /56 and /48, is
// the client's to write. Counted by them, one host with one IPv4 address
// would spread itself over 2^32 /64s and 2^16 /48s, and every client of
// one server (most of them used Microsoft's) would share one /64.
//
// It is not read as the client's IPv4 address either: answers to 2001::/32
// go to whichever relay announces it nearest XCloak, which anyone with a
// network of their own may run, as 6to4's, and which could then spend any
// IPv4 address's limits.
var teredoPrefix = netip.MustParsePrefix("2001::/32")

// CountedAddr is the address the limits, events and attack detection
// count a client by: addr without its zone, and the IPv4 address an IPv6
// address stands for when it is IPv4-mapped (::ffff:192.0.2.1) or of
// NAT64's well-known prefix (64:ff9b::192.0.2.1). A Teredo address has
// its client's IPv4 address written in place of its server's, its flags
// and port zero (teredoPrefix), so that its /64 is that IPv4 address,
// its /56 the address's /24 and its /48 its /16, apart from the IPv4
// address's own counts; the address so counted counts the same. Other
// addresses, 6to4's among them, and the zero Addr, are returned as they
// are.
func CountedAddr(addr netip.Addr) netip.Addr {
	addr = addr.Unmap().WithZone("")
	if v4, ok := TranslatedIPv4(addr, nat64Prefix); ok {
		return v4
	}
	if teredoPrefix.Contains(addr) {
		b := addr.As16()
		for i := range 4 {
			b[4+i] = ^b[12+i] // the client's address, inverted in the last 32 bits
			b[8+i] = 0
		}
		return netip.AddrFrom16(b)
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
