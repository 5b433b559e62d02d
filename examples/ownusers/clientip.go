package main

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Bounds on the X-Forwarded-For chain clientIP reads, counted from the
// right, where the proxies append: a client can send a header of any
// length, and these keep the work per request small whatever arrives.
const (
	maxForwardedHops  = 32
	maxForwardedBytes = 4 << 10
)

// clientIP is the address of the user's browser: the connection's peer,
// or, when the peer is a trusted proxy, the address X-Forwarded-For names
// as XCloak's own web/clientip.go reads it. Anyone can send the header;
// only what trusted proxies appended is believed, so the chain is walked
// from the right, past trusted addresses, to the first untrusted one. A
// hop that cannot be read ("unknown", a name, garbage) ends the walk at
// the last trusted hop seen, as do the bounds above: the hop to its left
// was written by no one the app trusts. Hops may carry a port, as some
// proxies send: "203.0.113.7:4711", "[2001:db8::1]:443".
func (a *App) clientIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	last := peer.Unmap().WithZone("")
	if !a.isTrusted(last) {
		return last
	}
	lines := r.Header.Values("X-Forwarded-For")
	hops, size := 0, 0
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for rest != "" {
			entry := rest
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				entry, rest = rest[j+1:], rest[:j]
				size++ // the comma
			} else {
				rest = ""
			}
			if size += len(entry); size > maxForwardedBytes {
				return last
			}
			entry = strings.Trim(entry, " \t")
			if entry == "" {
				continue // an empty list element carries nothing
			}
			if hops++; hops > maxForwardedHops {
				return last
			}
			addr, ok := parseHop(entry)
			if !ok {
				return last
			}
			if !a.isTrusted(addr) {
				return addr
			}
			last = addr
		}
	}
	return last
}

// parseHop reads one X-Forwarded-For hop: an IPv4 or IPv6 address, an IPv4
// address with a port, or a bracketed IPv6 address with or without one.
// An IPv6 address without brackets is all address: its port could not be
// told apart from it.
func parseHop(s string) (netip.Addr, bool) {
	if addr, err := netip.ParseAddr(s); err == nil {
		return addr.Unmap().WithZone(""), true
	}
	var host, port string
	if rest, ok := strings.CutPrefix(s, "["); ok {
		var found bool
		if host, rest, found = strings.Cut(rest, "]"); !found {
			return netip.Addr{}, false
		}
		if rest != "" {
			if port, found = strings.CutPrefix(rest, ":"); !found || !validPort(port) {
				return netip.Addr{}, false
			}
		}
		addr, err := netip.ParseAddr(host)
		if err != nil || !addr.Is6() {
			return netip.Addr{}, false
		}
		return addr.Unmap().WithZone(""), true
	}
	host, port, found := strings.Cut(s, ":")
	if !found || !validPort(port) {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !addr.Is4() {
		return netip.Addr{}, false
	}
	return addr, true
}

// validPort reports whether p is a decimal port, or an obfuscated one as
// RFC 7239 allows ("_" and letters, digits, ".", "_" or "-").
func validPort(p string) bool {
	if obf, ok := strings.CutPrefix(p, "_"); ok {
		return obf != "" && !strings.ContainsFunc(obf, func(c rune) bool {
			return (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '.' && c != '_' && c != '-'
		})
	}
	if p == "" || len(p) > 5 || strings.ContainsFunc(p, func(c rune) bool { return c < '0' || c > '9' }) {
		return false
	}
	n := 0
	for _, c := range p {
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

func (a *App) isTrusted(addr netip.Addr) bool {
	for _, p := range a.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
