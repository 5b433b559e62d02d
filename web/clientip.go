package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/xcloak/xcloak/auth"
)

// Limits on the forwarding information ClientIP reads. A client can send
// headers of any size; these bounds keep the work per request small no matter
// what arrives.
const (
	// maxForwardedHops is how many chain entries, counted from the right,
	// ClientIP considers before it gives up looking further left.
	maxForwardedHops = 32
	// maxForwardedBytes is how much of the chain, counted from the right,
	// ClientIP reads before it gives up looking further left.
	maxForwardedBytes = 4 << 10
)

// ParseNAT64Prefixes parses XCLOAK_NAT64_PREFIXES: a comma-separated list
// of the IPv6 prefixes through which the operator's translators (NAT64,
// SIIT; RFC 6052) present IPv4 clients, such as "2001:db8:64::/96". Each
// is 32, 40, 48, 56, 64 or 96 bits long, without host bits (a typo there
// would make another network's hosts into IPv4 addresses), and a /96
// leaves bits 64 to 71 zero, as RFC 6052 requires. Spaces around
// entries, empty entries and repeated ones are ignored. The well-known
// prefix, 64:ff9b::/96, needs no entry (auth.CountedAddr) and is ignored
// too. A prefix that overlaps another entry, the well-known prefix, 6to4's
// 2002::/16 or IPv4-mapped ::ffff:0:0/96 is refused (overlapping).
func ParseNAT64Prefixes(s string) ([]netip.Prefix, error) {
	var prefixes []netip.Prefix
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := netip.ParsePrefix(entry)
		switch bits := p.Bits(); {
		case err != nil:
		case !p.Addr().Is6() || p.Addr().Is4In6():
			err = errors.New("not an IPv6 prefix")
		case bits != 32 && bits != 40 && bits != 48 && bits != 56 && bits != 64 && bits != 96:
			err = errors.New("RFC 6052 prefixes are 32, 40, 48, 56, 64 or 96 bits long")
		case p.Masked() != p:
			err = fmt.Errorf("host bits set; the prefix is %s", p.Masked())
		case bits == 96 && p.Addr().As16()[8] != 0:
			// Bits 64 to 71 are zero in every address that embeds an
			// IPv4 one; a /96 that sets them embeds none.
			err = errors.New("bits 64 to 71 are set, which RFC 6052 reserves as zero")
		}
		if err == nil {
			if p == wellKnownNAT64 || slices.Contains(prefixes, p) {
				continue // read already, the same way
			}
			err = overlapping(p, prefixes)
		}
		if err != nil {
			return nil, fmt.Errorf("nat64 prefix %q: %w", entry, err)
		}
		prefixes = append(prefixes, p)
	}
	return prefixes, nil
}

// wellKnownNAT64 is NAT64's well-known prefix, which auth.CountedAddr
// reads without an entry.
var wellKnownNAT64 = auth.WellKnownNAT64()

// readByItself are the prefixes whose addresses XCloak already takes for
// the IPv4 address they stand for (auth.CountedAddr, parsePeer), each as
// it reads them.
var readByItself = []netip.Prefix{
	wellKnownNAT64,
	netip.MustParsePrefix("::ffff:0:0/96"), // IPv4-mapped
}

// sixToFour is 6to4's prefix (RFC 3056), which embeds an IPv4 address
// but whose answers go to whichever relay announces it nearest
// (auth.CountedAddr): no operator's translator presents clients from it.
var sixToFour = netip.MustParsePrefix("2002::/16")

// overlapping refuses p when it overlaps one of the prefixes listed
// before it or one XCloak reads by itself: an address under both would
// embed a different IPv4 address under each, and which one it counted as
// would hang on the order of the list (a /32 listed before a /96 inside
// it would make all the /96's clients one address). 6to4's prefix is
// refused too: its relays are anyone's, not the operator's translators.
func overlapping(p netip.Prefix, listed []netip.Prefix) error {
	if p.Overlaps(sixToFour) {
		return fmt.Errorf("overlaps %s, 6to4's, whose relays anyone may run: no translator of yours", sixToFour)
	}
	for _, q := range readByItself {
		if p.Overlaps(q) {
			return fmt.Errorf("overlaps %s, whose addresses XCloak reads by itself", q)
		}
	}
	for _, q := range listed {
		if p.Overlaps(q) {
			return fmt.Errorf("overlaps %s, listed before it: an address under both would embed a different IPv4 address in each", q)
		}
	}
	return nil
}

// translated is an address given as text, an application's client_ip or
// a network searched on the dashboard, as the limits and the events count
// it: the IPv4 address it embeds when it is under one of the operator's
// translators (Config.NAT64Prefixes), and a network under one of theirs
// or under the well-known prefix the IPv4 network its addresses embed
// (an address of the well-known prefix auth.CountedAddr reads). Anything
// else (a wider network, a zone, text that is no address) is as given,
// for auth.Decide or the search to check.
func (s *Server) translated(clientIP string) string {
	if !strings.Contains(clientIP, "/") {
		if len(s.cfg.NAT64Prefixes) == 0 {
			return clientIP
		}
		addr, err := netip.ParseAddr(clientIP)
		if err != nil {
			return clientIP
		}
		for _, p := range s.cfg.NAT64Prefixes {
			if v4, ok := auth.TranslatedIPv4(addr, p); ok {
				return v4.String()
			}
		}
		return clientIP
	}
	network, err := netip.ParsePrefix(clientIP)
	if err != nil {
		return clientIP
	}
	network = network.Masked()
	for _, t := range append(slices.Clip(s.cfg.NAT64Prefixes), wellKnownNAT64) {
		if network.Bits() >= t.Bits() && t.Contains(network.Addr()) {
			if v4, ok := embeddedNetwork(network, t); ok {
				return v4.String()
			}
		}
	}
	return clientIP
}

// embeddedNetwork is the IPv4 network whose addresses those of p, a
// prefix inside the translator's prefix t, embed: false when none do
// (bits 64 to 71, the "u" octet, set).
func embeddedNetwork(p, t netip.Prefix) (netip.Prefix, bool) {
	v4, ok := auth.TranslatedIPv4(p.Addr(), t)
	if !ok {
		return netip.Prefix{}, false
	}
	// The u octet's bits are not the IPv4 address's.
	n := p.Bits() - t.Bits() - max(0, min(p.Bits(), 72)-max(t.Bits(), 64))
	return netip.PrefixFrom(v4, min(n, 32)).Masked(), true
}

// TranslatedTrust is a trusted proxy's prefix that holds the addresses
// of a wide part of the IPv4 Internet through a translator's prefix.
type TranslatedTrust struct {
	// Trusted is the entry of XCLOAK_TRUSTED_PROXIES, Translator the
	// prefix under which its addresses embed IPv4 ones, and IPv4 the
	// IPv4 addresses they embed.
	Trusted, Translator, IPv4 netip.Prefix
}

func (w TranslatedTrust) String() string {
	return w.Trusted.String() + " holds " + w.IPv4.String() + " through " + w.Translator.String()
}

// TrustedOverTranslators returns the trusted prefixes that hold a wide
// part (shorter than an IPv4 /8, as broad trusted IPv4 prefixes are
// counted) of the IPv4 clients a translator presents: those of the
// operator's translators (XCLOAK_NAT64_PREFIXES) and of the well-known
// prefix. Every such client is then a trusted proxy, which
// names whatever address it likes in the forwarded header, as under
// 0.0.0.0/0. An operator does it unawares by trusting the /64 its
// proxies live in when the translator's /96 was made of that /64 and four
// zero octets, as RFC 6052 suggests.
func TrustedOverTranslators(trusted, translators []netip.Prefix) []TranslatedTrust {
	all := append(slices.Clip(translators), wellKnownNAT64)
	var out []TranslatedTrust
	for _, p := range trusted {
		p = p.Masked()
		for _, t := range all {
			if !p.Overlaps(t) {
				continue
			}
			if p.Bits() <= t.Bits() {
				out = append(out, TranslatedTrust{p, t, netip.PrefixFrom(netip.IPv4Unspecified(), 0)})
				continue
			}
			if v4, ok := embeddedNetwork(p, t); ok && v4.Bits() < 8 {
				out = append(out, TranslatedTrust{p, t, v4})
			}
		}
	}
	return out
}

// ParseTrustedProxies parses a comma-separated list of CIDRs and single IP
// addresses, such as "10.0.0.0/8, 192.168.1.7, ::1/128", as read from
// XCLOAK_TRUSTED_PROXIES. Spaces around entries and empty entries are
// ignored, so an empty string yields nil (trust no proxy). A single address
// becomes a /32 or /128 prefix. A CIDR with host bits set (10.0.0.5/8) is
// refused: it is most often a typo for one address that would trust its
// whole network, every client in it then naming its own address. An entry
// that is not an address or CIDR is an error naming it.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var prefixes []netip.Prefix
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := parseTrustedEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", entry, err)
		}
		prefixes = append(prefixes, p)
	}
	return prefixes, nil
}

func parseTrustedEntry(entry string) (netip.Prefix, error) {
	if strings.Contains(entry, "/") {
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p != p.Masked() {
			return netip.Prefix{}, fmt.Errorf("host bits set: write %s for the proxy alone, or %s for its network",
				p.Addr(), p.Masked())
		}
		return normalizePrefix(p), nil
	}
	addr, err := netip.ParseAddr(entry)
	if err != nil {
		return netip.Prefix{}, err
	}
	// Peers are compared without their zone, so a zone here could never
	// match; refusing it beats silently trusting something else.
	if addr.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zone %q not allowed", addr.Zone())
	}
	return normalizePrefix(netip.PrefixFrom(addr, addr.BitLen())), nil
}

// normalizePrefix masks p and rewrites an IPv4-mapped IPv6 prefix such as
// ::ffff:10.0.0.0/104 as 10.0.0.0/8, because addresses are unmapped before
// they are compared and would otherwise never fall inside it.
func normalizePrefix(p netip.Prefix) netip.Prefix {
	addr, bits := p.Addr(), p.Bits()
	if addr.Is4In6() && bits >= 96 {
		addr, bits = addr.Unmap(), bits-96
	}
	return netip.PrefixFrom(addr, bits).Masked()
}

// ForwardedHeader names the one header a trusted proxy's forwarding chain
// is read from, as XCLOAK_FORWARDED_HEADER sets it. It is chosen by the
// operator, never by which header a request happens to carry: proxies pass
// headers they do not manage through untouched, so a client behind a proxy
// that appends to X-Forwarded-For could otherwise pick its own address by
// sending a Forwarded header of its own.
type ForwardedHeader string

// The headers a chain can be read from.
const (
	// HeaderXForwardedFor reads X-Forwarded-For, which nginx, HAProxy,
	// Caddy and most load balancers append to. The zero ForwardedHeader
	// means it too.
	HeaderXForwardedFor ForwardedHeader = "x-forwarded-for"
	// HeaderForwarded reads the for= values of Forwarded (RFC 7239).
	HeaderForwarded ForwardedHeader = "forwarded"
	// HeaderNone reads no header: the connection's peer is the client even
	// when it is a trusted proxy.
	HeaderNone ForwardedHeader = "none"
)

// ParseForwardedHeader reads XCLOAK_FORWARDED_HEADER: x-forwarded-for,
// forwarded or none, in any case.
func ParseForwardedHeader(s string) (ForwardedHeader, error) {
	switch h := ForwardedHeader(strings.ToLower(strings.TrimSpace(s))); h {
	case HeaderXForwardedFor, HeaderForwarded, HeaderNone:
		return h, nil
	}
	return "", fmt.Errorf("%q is not x-forwarded-for, forwarded or none", s)
}

// ClientIPResolver finds the address of the client behind any trusted
// proxies. Its zero value trusts no proxy, so every request's client is the
// connection's peer. It is safe for concurrent use.
type ClientIPResolver struct {
	trusted []netip.Prefix
	header  ForwardedHeader
	// log, when set (NewServer sets the server's), is told of a trusted
	// peer that sends the other header instead of the configured one
	// (warnOtherHeader); warned makes that once per resolver, and so
	// per process, however many such requests arrive.
	log    *slog.Logger
	warned atomic.Bool
	// hopWarned makes warnUnreadableHop's warning once per resolver.
	hopWarned atomic.Bool
	// translators are the operator's NAT64 or SIIT prefixes
	// (XCLOAK_NAT64_PREFIXES; NewServer sets them): a client found in one
	// is the IPv4 address it embeds.
	translators []netip.Prefix
	// suffixWarned makes warnSuffix's warning once per resolver.
	suffixWarned atomic.Bool
}

// NewClientIPResolver returns a resolver that reads the forwarding chain
// from header (the zero value: X-Forwarded-For), and only from peers
// inside one of the trusted prefixes. The slice is copied; invalid
// prefixes are dropped.
func NewClientIPResolver(trusted []netip.Prefix, header ForwardedHeader) *ClientIPResolver {
	if header == "" {
		header = HeaderXForwardedFor
	}
	r := &ClientIPResolver{header: header}
	for _, p := range trusted {
		if p.IsValid() {
			r.trusted = append(r.trusted, normalizePrefix(p))
		}
	}
	return r
}

func (r *ClientIPResolver) isTrusted(addr netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// ClientIP returns the address of the client that sent req.
//
// The peer is taken from req.RemoteAddr, which must be host:port; an
// IPv4-mapped IPv6 peer is unmapped and a zone is dropped. A RemoteAddr that
// cannot be parsed gives the zero Addr. If the peer is not a trusted proxy,
// it is the client, whatever the request's headers claim.
//
// Behind a trusted peer, the forwarding chain is read from the one header
// the resolver was made for, whatever other headers the request carries:
// X-Forwarded-For, or the for= values of Forwarded (RFC 7239), taking every
// line in order and every comma-separated entry (a comma inside one of
// Forwarded's quoted strings is the string's). With HeaderNone the peer
// is the client. A trusted peer's request without the header has the peer
// as its client; one that carries the other header instead is logged, once
// (warnOtherHeader). The chain is walked from the right, the end the
// proxies append to: trusted addresses are skipped and the first untrusted
// one is the client. Only trusted proxies vouch for the entry to their left,
// so an entry that cannot be parsed ("unknown", an obfuscated "_hidden",
// garbage) ends the walk and the last trusted hop seen is returned, as is
// the leftmost entry when every hop is trusted. Entries may carry ports and
// IPv6 brackets, as in "[2001:db8::1]:4711" or "192.0.2.43:47011".
//
// The walk considers at most 32 hops and the last 4 KiB of the chain; past
// either it stops and the last trusted hop seen is returned. Bounding the
// walk, not the header, keeps what the client cannot forge: a client that
// pads the chain it sends is still found where its proxy put it, on the
// right, rather than hidden behind the proxy itself.
//
// A client address in one of the translators' prefixes is the IPv4
// address it embeds (auth.TranslatedIPv4); proxies are recognised by
// their own addresses before that.
func (r *ClientIPResolver) ClientIP(req *http.Request) netip.Addr {
	addr := r.chainClient(req)
	for _, p := range r.translators {
		if v4, ok := auth.TranslatedIPv4(addr, p); ok {
			if !zeroSuffix(addr, p) {
				r.warnSuffix(addr, p, v4)
			}
			return v4
		}
	}
	return addr
}

// zeroSuffix reports whether the bits of addr after the IPv4 address it
// embeds under p are zero, as RFC 6052 has a translator write them.
func zeroSuffix(addr netip.Addr, p netip.Prefix) bool {
	if p.Bits() == 96 {
		return true // no suffix
	}
	at := p.Bits()/8 + 4
	if at > 8 {
		at++ // the u octet, bits 64 to 71, is inside the IPv4 address
	}
	b := addr.As16()
	return !slices.ContainsFunc(b[max(at, 9):], func(c byte) bool { return c != 0 })
}

// warnSuffix logs, once, a client under the translator's prefix p whose
// suffix is not zero: no translator writes one, so p is most likely
// shorter than the translator's prefix (the local-use block
// 64:ff9b:1::/48 listed for a translator of a /96 inside it), and reads
// the wrong bits as the IPv4 address, the same one for many clients,
// whose limits then refuse them all.
func (r *ClientIPResolver) warnSuffix(addr netip.Addr, p netip.Prefix, v4 netip.Addr) {
	if r.log == nil || r.suffixWarned.Load() || !r.suffixWarned.CompareAndSwap(false, true) {
		return
	}
	r.log.Warn("a client under the XCLOAK_NAT64_PREFIXES entry "+p.String()+" has bits set after the IPv4 address it "+
		"embeds, which translators leave zero (RFC 6052): is the translator's prefix longer than the entry? Read under it, "+
		"clients may count as one wrong IPv4 address; list the translator's own prefix (logged once)",
		"prefix", p.String(), "client", addr.String(), "read_as", v4.String())
}

// chainClient is ClientIP before the translators.
func (r *ClientIPResolver) chainClient(req *http.Request) netip.Addr {
	if req == nil {
		return netip.Addr{}
	}
	peer, ok := parsePeer(req.RemoteAddr)
	if !ok {
		return netip.Addr{}
	}
	if !r.isTrusted(peer) {
		return peer
	}

	var (
		lines    []string
		parseHop func(string) (netip.Addr, bool)
		// lastComma finds the comma before a line's last hop, -1 for none
		lastComma func(string) int
		// the header read, and the other one, in canonical form
		header, other string
	)
	switch r.header {
	case HeaderForwarded:
		header, other, parseHop, lastComma = "Forwarded", "X-Forwarded-For", parseForwardedElement, lastElementComma
	case HeaderNone:
		return peer
	default:
		header, other, parseHop, lastComma = "X-Forwarded-For", "Forwarded", parseNode, lastByteComma
	}
	lines = req.Header.Values(header)
	if len(lines) == 0 {
		r.warnOtherHeader(req, peer, header, other)
		return peer
	}
	last, hops, size := peer, 0, 0
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for rest != "" {
			entry := rest
			if j := lastComma(rest); j >= 0 {
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
				continue // empty list elements are allowed and carry nothing
			}
			if hops++; hops > maxForwardedHops {
				return last
			}
			addr, ok := parseHop(entry)
			if !ok {
				if hops == 1 {
					r.warnUnreadableHop(peer, header)
				}
				return last
			}
			if !r.isTrusted(addr) {
				return addr
			}
			last = addr
		}
	}
	return last
}

// lastByteComma is the index of s's last comma, -1 if it has none: an
// X-Forwarded-For hop is an address, which holds no comma and no quote.
func lastByteComma(s string) int { return strings.LastIndexByte(s, ',') }

// lastElementComma is the index of the last comma of s, a Forwarded line,
// that separates two elements, -1 if there is none: a comma inside a
// quoted string is part of its value, such as the Host a client sent,
// which a proxy writes as host="…" (RFC 7239). The line is read from the
// right, the end its proxies append whole elements to: their quotes pair
// up from there, and an escaped quote is one after an odd run of
// backslashes, which only a quoted string holds. A quote the client
// opened or closed further left is never reached before the hop its
// proxy wrote, so it cannot swallow that hop, nor make its own text one.
func lastElementComma(s string) int {
	quoted := false
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case '"':
			n := 0
			for n < i && s[i-1-n] == '\\' {
				n++
			}
			if n%2 == 0 {
				quoted = !quoted
			}
		case ',':
			if !quoted {
				return i
			}
		}
	}
	return -1
}

// warnOtherHeader logs, once, that the trusted peer sent req without the
// header the resolver reads but with the other one: a proxy configured to
// write the one XCLOAK_FORWARDED_HEADER does not name, behind which every
// request counts as the proxy's own address, so that one client's limits
// refuse everyone. Only the headers' names and the proxy's address are
// logged, never what a client may have written in them; after the first,
// such a request costs one atomic load.
func (r *ClientIPResolver) warnOtherHeader(req *http.Request, peer netip.Addr, header, other string) {
	if r.log == nil || r.warned.Load() || len(req.Header.Values(other)) == 0 || !r.warned.CompareAndSwap(false, true) {
		return
	}
	r.log.Warn("a trusted proxy sent "+other+" but not "+header+", the header XCLOAK_FORWARDED_HEADER names: "+
		"every request through it counts as the proxy's own address, so one client's limits refuse everyone; "+
		"make the proxy write "+header+", or set XCLOAK_FORWARDED_HEADER to the header it writes (logged once)",
		"proxy", peer.String(), "configured_header", header, "sent_header", other)
}

// warnUnreadableHop logs, once, that the trusted peer's own hop in header
// is no address: an obfuscated identifier or "unknown" (RFC 7239 allows
// both, and some proxies write them by default), behind which every
// client counts as the proxy. Only the peer's hop, the line's last, is
// the proxy's: one further left may be whatever a client sent.
func (r *ClientIPResolver) warnUnreadableHop(peer netip.Addr, header string) {
	if r.log == nil || r.hopWarned.Load() || !r.hopWarned.CompareAndSwap(false, true) {
		return
	}
	r.log.Warn("a trusted proxy wrote a hop in "+header+" that is no address (an obfuscated identifier or \"unknown\"): "+
		"every request through it counts as the proxy's own address, so one client's limits refuse everyone; "+
		"make the proxy write the client's address (logged once)",
		"proxy", peer.String(), "header", header)
}

// parsePeer parses a connection's host:port address.
func parsePeer(remoteAddr string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return addr.Unmap().WithZone(""), true
}

// parseForwardedElement returns the address in the for= parameter of one
// Forwarded element such as `for="[2001:db8::1]:4711";proto=https;by=10.0.0.1`.
// An element with no for= or with more than one cannot be attributed to a
// single hop and so does not parse.
func parseForwardedElement(elem string) (netip.Addr, bool) {
	var (
		node  string
		found bool
	)
	for elem != "" {
		pair, rest, ok := cutPair(elem)
		if !ok {
			return netip.Addr{}, false
		}
		elem = rest
		pair = strings.Trim(pair, " \t")
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		if !ok {
			return netip.Addr{}, false
		}
		value, ok = unquote(strings.Trim(value, " \t"))
		if !ok {
			return netip.Addr{}, false
		}
		if strings.EqualFold(strings.Trim(name, " \t"), "for") {
			if found {
				return netip.Addr{}, false
			}
			node, found = value, true
		}
	}
	if !found {
		return netip.Addr{}, false
	}
	return parseNode(node)
}

// cutPair splits elem at the first semicolon outside a quoted string. It
// reports false for an unterminated quote.
func cutPair(elem string) (pair, rest string, ok bool) {
	quoted := false
	for i := 0; i < len(elem); i++ {
		switch c := elem[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ';':
			return elem[:i], elem[i+1:], true
		}
	}
	if quoted {
		return "", "", false
	}
	return elem, "", true
}

// unquote returns the content of an RFC 7230 quoted-string, or v unchanged
// if it is a token.
func unquote(v string) (string, bool) {
	if !strings.HasPrefix(v, `"`) {
		return v, !strings.Contains(v, `"`)
	}
	if len(v) < 2 || v[len(v)-1] != '"' {
		return "", false
	}
	v = v[1 : len(v)-1]
	if !strings.ContainsAny(v, `\"`) {
		return v, true
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			if i++; i == len(v) {
				return "", false
			}
		case '"':
			return "", false
		}
		b.WriteByte(v[i])
	}
	return b.String(), true
}

// parseNode parses one hop's address: a bare IPv4 or IPv6 address, an IPv4
// address with a port, or a bracketed IPv6 address with or without a port.
// Ports may be obfuscated (RFC 7239 "_abc"); the address may not.
func parseNode(s string) (netip.Addr, bool) {
	host := s
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host = s[1:end]
		if rest := s[end+1:]; rest != "" {
			port, ok := strings.CutPrefix(rest, ":")
			if !ok || !validPort(port) {
				return netip.Addr{}, false
			}
		}
		addr, err := netip.ParseAddr(host)
		if err != nil || !addr.Is6() {
			return netip.Addr{}, false
		}
		return addr.Unmap().WithZone(""), true
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr.Unmap().WithZone(""), true
	}
	// Only IPv4 may carry a port without brackets; for IPv6 the port could
	// not be told apart from the address.
	host, port, ok := strings.Cut(s, ":")
	if !ok || !validPort(port) {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !addr.Is4() {
		return netip.Addr{}, false
	}
	return addr, true
}

// validPort reports whether p is a decimal port or an RFC 7239 obfuscated
// port ("_" followed by letters, digits, ".", "_" or "-").
func validPort(p string) bool {
	if p == "" {
		return false
	}
	if obf, ok := strings.CutPrefix(p, "_"); ok {
		if obf == "" {
			return false
		}
		for _, c := range []byte(obf) {
			if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return true
	}
	if len(p) > 5 {
		return false
	}
	n := 0
	for _, c := range []byte(p) {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
