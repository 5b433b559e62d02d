package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseTrustedProxies(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string // substring of the error; "" means no error
	}{
		{name: "empty", in: "", want: nil},
		{name: "only spaces and commas", in: " , ,", want: nil},
		{name: "mixed list", in: "10.0.0.0/8, 192.168.1.7, ::1/128", want: []string{"10.0.0.0/8", "192.168.1.7/32", "::1/128"}},
		{name: "single IPv6", in: "2001:db8::5", want: []string{"2001:db8::5/128"}},
		{name: "host bits refused", in: "10.0.0.0/8, 10.1.2.3/8", wantErr: `"10.1.2.3/8": host bits set: write 10.1.2.3 for the proxy alone, or 10.0.0.0/8 for its network`},
		{name: "host bits refused in IPv6", in: "2001:db8::5/48", wantErr: `write 2001:db8::5 for the proxy alone, or 2001:db8::/48`},
		{name: "mapped prefix becomes IPv4", in: "::ffff:10.0.0.0/104", want: []string{"10.0.0.0/8"}},
		{name: "mapped single address becomes IPv4", in: "::ffff:10.0.0.1", want: []string{"10.0.0.1/32"}},
		{name: "every mapped address becomes every IPv4 address", in: "::ffff:0.0.0.0/96", want: []string{"0.0.0.0/0"}},
		{name: "trailing comma", in: "10.0.0.1,", want: []string{"10.0.0.1/32"}},
		{name: "garbage entry", in: "10.0.0.0/8, proxy.internal", wantErr: `"proxy.internal"`},
		{name: "bad prefix length", in: "10.0.0.0/33", wantErr: `"10.0.0.0/33"`},
		{name: "zone", in: "fe80::1%eth0", wantErr: `"fe80::1%eth0"`},
		{name: "port", in: "10.0.0.1:80", wantErr: `"10.0.0.1:80"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTrustedProxies(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTrustedProxies(%q) error = %v, want one naming %s", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTrustedProxies(%q) error = %v", tt.in, err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("ParseTrustedProxies(%q) = %v, want %v", tt.in, got, tt.want)
			}
			for i := range got {
				if got[i].String() != tt.want[i] {
					t.Errorf("ParseTrustedProxies(%q)[%d] = %v, want %v", tt.in, i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestClientIP(t *testing.T) {
	const trusted = "10.0.0.0/8, 192.168.1.7, 2001:db8:ffff::/48"
	tests := []struct {
		name    string
		header  ForwardedHeader // "" is the default, X-Forwarded-For
		trusted string
		remote  string
		xff     []string // X-Forwarded-For lines
		fwd     []string // Forwarded lines
		want    string   // "" is the zero Addr
	}{
		// An untrusted peer is the client, whatever it claims.
		{name: "no proxies trusted", trusted: "", remote: "10.0.0.1:1234", xff: []string{"203.0.113.9"}, want: "10.0.0.1"},
		{name: "untrusted peer spoofs XFF", trusted: trusted, remote: "198.51.100.1:1234", xff: []string{"203.0.113.9"}, want: "198.51.100.1"},
		{name: "untrusted peer spoofs trusted XFF", trusted: trusted, remote: "198.51.100.1:1234", xff: []string{"10.0.0.2"}, want: "198.51.100.1"},
		{header: HeaderForwarded, name: "untrusted peer spoofs Forwarded", trusted: trusted, remote: "198.51.100.1:1234", fwd: []string{"for=203.0.113.9"}, want: "198.51.100.1"},
		{name: "untrusted IPv6 peer", trusted: trusted, remote: "[2001:db8::1]:443", xff: []string{"203.0.113.9"}, want: "2001:db8::1"},

		// Trusted peers.
		{name: "trusted peer without headers", trusted: trusted, remote: "10.0.0.1:1234", want: "10.0.0.1"},
		{name: "trusted peer with empty XFF", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{""}, want: "10.0.0.1"},
		{name: "single proxy XFF", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "single proxy by single address", trusted: trusted, remote: "192.168.1.7:1234", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "neighbour of single trusted address", trusted: trusted, remote: "192.168.1.8:1234", xff: []string{"203.0.113.9"}, want: "192.168.1.8"},
		{header: HeaderForwarded, name: "single proxy Forwarded", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=203.0.113.9"}, want: "203.0.113.9"},
		{name: "IPv6 proxy", trusted: trusted, remote: "[2001:db8:ffff::10]:443", xff: []string{"2001:db8:1::7"}, want: "2001:db8:1::7"},

		// Chains of proxies.
		{name: "chain of trusted proxies", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9, 10.0.0.3, 192.168.1.7, 10.0.0.2"}, want: "203.0.113.9"},
		{name: "chain over several lines", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9, 10.0.0.3", "192.168.1.7", "10.0.0.2"}, want: "203.0.113.9"},
		{name: "untrusted hop in chain stops walk", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9, 198.51.100.7, 10.0.0.2"}, want: "198.51.100.7"},
		{name: "every hop trusted gives leftmost", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"10.0.0.4, 10.0.0.3, 10.0.0.2"}, want: "10.0.0.4"},
		{name: "empty elements ignored", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9,, 10.0.0.2 ,"}, want: "203.0.113.9"},

		// Spoofing from the left: the client prepends entries, the proxies append.
		{name: "client prepends fake trusted entries", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"10.0.0.9, 10.0.0.8, 203.0.113.9, 10.0.0.2"}, want: "203.0.113.9"},
		{name: "client prepends fake client", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"1.2.3.4, 203.0.113.9"}, want: "203.0.113.9"},
		{name: "client sends its own XFF line", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"1.2.3.4", "203.0.113.9"}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "client prepends fake Forwarded", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=1.2.3.4, for=10.0.0.5, for=203.0.113.9"}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "client opens quote proxy appends", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for="1.2.3.4, for=203.0.113.9`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "quoted comma cannot hide a hop", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for="1.2.3.4,10.0.0.5", for=203.0.113.9`}, want: "203.0.113.9"},

		// Entries that cannot be parsed end the walk at the last trusted hop.
		{name: "garbage in the middle", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9, not-an-ip, 10.0.0.2"}, want: "10.0.0.2"},
		{name: "garbage right of client", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9, garbage"}, want: "10.0.0.1"},
		{name: "garbage left of client ignored", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"garbage, 203.0.113.9"}, want: "203.0.113.9"},
		{name: "XFF unknown", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"unknown, 10.0.0.2"}, want: "10.0.0.2"},
		{header: HeaderForwarded, name: "Forwarded unknown", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=unknown, for=10.0.0.2"}, want: "10.0.0.2"},
		{header: HeaderForwarded, name: "Forwarded obfuscated", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=_hidden, for=10.0.0.2"}, want: "10.0.0.2"},
		{header: HeaderForwarded, name: "Forwarded without for", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=203.0.113.9, proto=https"}, want: "10.0.0.1"},
		{header: HeaderForwarded, name: "Forwarded with two fors", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=203.0.113.9;for=198.51.100.1"}, want: "10.0.0.1"},
		{header: HeaderForwarded, name: "Forwarded unterminated quote", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for="203.0.113.9`}, want: "10.0.0.1"},
		{header: HeaderForwarded, name: "Forwarded pair without value", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=203.0.113.9;secret"}, want: "10.0.0.1"},
		{name: "bracketed IPv4", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"[203.0.113.9]"}, want: "10.0.0.1"},
		{name: "bad port", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9:99999"}, want: "10.0.0.1"},
		{name: "port past the highest", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9:65536"}, want: "10.0.0.1"},

		// Forwarded syntax.
		{header: HeaderForwarded, name: "Forwarded quoted IPv4", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for="203.0.113.9"`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded IPv4 with port", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for="192.0.2.43:47011"`}, want: "192.0.2.43"},
		{header: HeaderForwarded, name: "Forwarded IPv6 bracketed with port", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for="[2001:db8::1]:4711"`}, want: "2001:db8::1"},
		{header: HeaderForwarded, name: "Forwarded IPv6 bracketed", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`For="[2001:db8:cafe::17]"`}, want: "2001:db8:cafe::17"},
		{header: HeaderForwarded, name: "Forwarded obfuscated port", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for="192.0.2.43:_p1"`}, want: "192.0.2.43"},
		{header: HeaderForwarded, name: "Forwarded escaped quote content", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for="203.0.113.\9"`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded several params", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=203.0.113.9;proto=https;by=10.0.0.2"}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded for not first", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`proto=https; by="[2001:db8::9]"; for=203.0.113.9; host="a;b.example"`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded quoted semicolon in other param", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for=203.0.113.9;ext="a;b"`}, want: "203.0.113.9"},
		// A comma inside a quoted value belongs to the value (RFC 7239): a
		// proxy that writes the Host it was sent as host="…" writes one
		// when the client puts one there, and the element is still its own.
		{header: HeaderForwarded, name: "Forwarded quoted comma in the proxy's element", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for=203.0.113.9;proto=https;host="login.example,x"`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded quoted comma before for", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`host="a,b";for=203.0.113.9`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded quoted commas in a chain", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for=198.51.100.3, for=203.0.113.9;host="a,b", for=10.0.0.2;host=",,"`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded escaped quote and comma", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for=203.0.113.9;host="a\",b\\"`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "client opens quote proxy appends quoted comma", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for="1.2.3.4, for=203.0.113.9;host="a,b"`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "client's quotes cannot reach the proxy's element", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for=10.0.0.5;x="\", for=203.0.113.9;host="a,b"`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded quoted comma over 4 KiB", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for=203.0.113.9;host="` + strings.Repeat(",", 4096) + `"`}, want: "10.0.0.1"},
		{header: HeaderForwarded, name: "Forwarded chain", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{`for=203.0.113.9;proto=https, for="[2001:db8:ffff::3]:80";by=10.0.0.1, for=10.0.0.2`}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded multiple lines", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=198.51.100.3", "for=203.0.113.9;proto=http", "for=10.0.0.2"}, want: "203.0.113.9"},

		// One header is read, the one configured, whatever else arrives:
		// a client's own header passes through proxies that do not manage it.
		{name: "XFF mode ignores Forwarded", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"198.51.100.3"}, fwd: []string{"for=203.0.113.9"}, want: "198.51.100.3"},
		{name: "XFF mode ignores client's Forwarded with rotating XFF", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"10.0.0.7, 1.2.3.4, 198.51.100.3"}, fwd: []string{"for=203.0.113.9", "for=10.0.0.2"}, want: "198.51.100.3"},
		{name: "XFF mode with only Forwarded gives peer", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=203.0.113.9"}, want: "10.0.0.1"},
		{name: "explicit XFF mode", header: HeaderXForwardedFor, trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"198.51.100.3"}, fwd: []string{"for=203.0.113.9"}, want: "198.51.100.3"},
		{header: HeaderForwarded, name: "Forwarded mode ignores XFF", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"198.51.100.3"}, fwd: []string{"for=203.0.113.9"}, want: "203.0.113.9"},
		{header: HeaderForwarded, name: "Forwarded mode with only XFF gives peer", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"198.51.100.3"}, want: "10.0.0.1"},
		{header: HeaderForwarded, name: "Forwarded mode with empty Forwarded gives peer", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"198.51.100.3"}, fwd: []string{""}, want: "10.0.0.1"},
		{header: HeaderNone, name: "none mode trusted peer with both headers", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"198.51.100.3"}, fwd: []string{"for=203.0.113.9"}, want: "10.0.0.1"},
		{header: HeaderNone, name: "none mode untrusted peer", trusted: trusted, remote: "198.51.100.1:1234", xff: []string{"203.0.113.9"}, want: "198.51.100.1"},
		{header: HeaderNone, name: "none mode mapped peer unmapped", trusted: trusted, remote: "[::ffff:10.0.0.1]:1234", xff: []string{"203.0.113.9"}, want: "10.0.0.1"},

		// XFF entry forms.
		{name: "XFF IPv4 with port", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9:5555"}, want: "203.0.113.9"},
		{name: "XFF IPv4 with the highest port", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9:65535"}, want: "203.0.113.9"},
		{name: "XFF bracketed IPv6", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"[2001:db8::1]"}, want: "2001:db8::1"},
		{name: "XFF bracketed IPv6 with port", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"[2001:db8::1]:443"}, want: "2001:db8::1"},
		{name: "XFF mapped IPv6 entry is trusted as IPv4", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9, ::ffff:10.0.0.2"}, want: "203.0.113.9"},
		{name: "XFF zone dropped", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"fe80::1%eth0"}, want: "fe80::1"},

		// Peer forms.
		{name: "mapped IPv6 peer matches IPv4 prefix", trusted: trusted, remote: "[::ffff:10.0.0.1]:1234", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "mapped IPv6 peer untrusted is unmapped", trusted: trusted, remote: "[::ffff:198.51.100.1]:1234", xff: []string{"203.0.113.9"}, want: "198.51.100.1"},
		{name: "mapped trusted prefix", trusted: "::ffff:10.0.0.0/104", remote: "10.0.0.1:1234", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "IPv6 zone peer", trusted: trusted, remote: "[fe80::1%eth0]:1234", xff: []string{"203.0.113.9"}, want: "fe80::1"},
		{name: "IPv6 zone peer trusted", trusted: "fe80::/10", remote: "[fe80::1%eth0]:1234", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "RemoteAddr without port", trusted: trusted, remote: "10.0.0.1", xff: []string{"203.0.113.9"}, want: ""},
		{name: "RemoteAddr empty", trusted: trusted, remote: "", xff: []string{"203.0.113.9"}, want: ""},
		{name: "RemoteAddr hostname", trusted: trusted, remote: "proxy.internal:80", xff: []string{"203.0.113.9"}, want: ""},
		{name: "RemoteAddr unbracketed IPv6", trusted: trusted, remote: "2001:db8::1", want: ""},
		{name: "RemoteAddr unix socket", trusted: trusted, remote: "@", want: ""},

		// Bounds.
		{name: "XFF over 4 KiB", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{strings.Repeat(" ", 4096) + "203.0.113.9"}, want: "10.0.0.1"},
		{name: "XFF over 4 KiB over many lines", trusted: trusted, remote: "10.0.0.1:1234", xff: append(repeat("10.0.0.5", 600), "203.0.113.9"), want: "203.0.113.9"},
		// A client that pads what it sends, behind a proxy that appends
		// to it: found where the proxy put it, not hidden behind the
		// proxy (the peer).
		{name: "client's padding over 4 KiB", trusted: trusted, remote: "10.0.0.1:1234",
			xff: []string{strings.TrimSuffix(strings.Repeat("1.1.1.1,", 520), ","), "203.0.113.9"}, want: "203.0.113.9"},
		{name: "client's padding on the proxy's line", trusted: trusted, remote: "10.0.0.1:1234",
			xff: []string{strings.Repeat("1.1.1.1,", 520) + " 203.0.113.9"}, want: "203.0.113.9"},
		{name: "4 KiB of trusted hops read", trusted: trusted, remote: "10.0.0.1:1234",
			xff: []string{"203.0.113.9," + strings.Repeat(strings.Repeat(" ", 500)+"10.0.0.5,", 9)}, want: "10.0.0.5"},
		{name: "XFF exactly 4 KiB", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{strings.Repeat(" ", 4096-len("203.0.113.9")) + "203.0.113.9"}, want: "203.0.113.9"},
		// The commas between hops are part of the chain's length.
		{name: "XFF exactly 4 KiB with its comma", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9," + strings.Repeat(" ", 4096-len("203.0.113.9,"))}, want: "203.0.113.9"},
		{name: "XFF over 4 KiB by its comma", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9," + strings.Repeat(" ", 4096-len("203.0.113.9"))}, want: "10.0.0.1"},
		{header: HeaderForwarded, name: "Forwarded over 4 KiB", trusted: trusted, remote: "10.0.0.1:1234", fwd: []string{"for=203.0.113.9;ext=" + strings.Repeat("a", 4096)}, want: "10.0.0.1"},
		{name: "client as 32nd hop", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9, " + hops(31)}, want: "203.0.113.9"},
		{name: "client as 33rd hop not reached", trusted: trusted, remote: "10.0.0.1:1234", xff: []string{"203.0.113.9, " + hops(32)}, want: "10.1.0.31"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefixes, err := ParseTrustedProxies(tt.trusted)
			if err != nil {
				t.Fatalf("ParseTrustedProxies(%q): %v", tt.trusted, err)
			}
			req := httptest.NewRequest(http.MethodPost, "/login", nil)
			req.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range tt.fwd {
				req.Header.Add("Forwarded", v)
			}
			got := NewClientIPResolver(prefixes, tt.header).ClientIP(req)
			var want netip.Addr
			if tt.want != "" {
				want = netip.MustParseAddr(tt.want)
			}
			if got != want {
				t.Errorf("ClientIP(header %q, RemoteAddr=%q, X-Forwarded-For=%q, Forwarded=%q) = %v, want %v",
					tt.header, tt.remote, tt.xff, tt.fwd, got, want)
			}
		})
	}
}

// hops returns n distinct trusted addresses, the nearest proxy last, so that
// the one furthest from the server is 10.1.0.(n-1).
func hops(n int) string {
	s := make([]string, n)
	for i := range s {
		s[n-1-i] = fmt.Sprintf("10.1.0.%d", i)
	}
	return strings.Join(s, ", ")
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestParseForwardedHeader(t *testing.T) {
	for in, want := range map[string]ForwardedHeader{
		"x-forwarded-for": HeaderXForwardedFor,
		"X-Forwarded-For": HeaderXForwardedFor,
		"forwarded":       HeaderForwarded,
		" Forwarded ":     HeaderForwarded,
		"none":            HeaderNone,
	} {
		if got, err := ParseForwardedHeader(in); err != nil || got != want {
			t.Errorf("ParseForwardedHeader(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x-real-ip", "xff", "forwarded, x-forwarded-for", "auto"} {
		if got, err := ParseForwardedHeader(in); err == nil {
			t.Errorf("ParseForwardedHeader(%q) = %q, want an error", in, got)
		}
	}
}

func TestClientIPZeroResolver(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.1:1234"
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	var r ClientIPResolver
	if got, want := r.ClientIP(req), netip.MustParseAddr("10.0.0.1"); got != want {
		t.Errorf("zero ClientIPResolver.ClientIP = %v, want %v", got, want)
	}
	if got := r.ClientIP(nil); got.IsValid() {
		t.Errorf("ClientIP(nil) = %v, want zero Addr", got)
	}
}

func TestNewClientIPResolverCopiesPrefixes(t *testing.T) {
	prefixes := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	r := NewClientIPResolver(prefixes, "")
	prefixes[0] = netip.MustParsePrefix("192.0.2.0/24")

	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.1:1234"
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	if got, want := r.ClientIP(req), netip.MustParseAddr("203.0.113.9"); got != want {
		t.Errorf("ClientIP after caller changed its slice = %v, want %v", got, want)
	}
}

// referencePeer parses RemoteAddr independently of the resolver, to check it.
func referencePeer(remoteAddr string) netip.Addr {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return addr.Unmap().WithZone("")
}

func FuzzClientIP(f *testing.F) {
	seeds := []struct{ remote, xff, fwd string }{
		{"10.0.0.1:1234", "203.0.113.9", ""},
		{"[::ffff:10.0.0.1]:1234", "1.2.3.4, 10.0.0.2", ""},
		{"[fe80::1%eth0]:1", "", `for="[2001:db8::1]:4711";proto=https, for=10.0.0.2`},
		{"10.0.0.1:1", "unknown", `for=_hidden;by="a;b"`},
		{"10.0.0.1:1", "", `for="1.2.3.4, for=5.6.7.8`},
		{"", "", ""},
		{"garbage", "[", `"`},
		{"10.0.0.1:1", "[2001:db8::1]:99999, 1.2.3.4:_x", `for="\`},
	}
	for _, s := range seeds {
		f.Add(s.remote, s.xff, s.fwd)
	}
	untrusting := NewClientIPResolver(nil, "")
	everything := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	trustingAll := NewClientIPResolver(everything, HeaderXForwardedFor)
	trustingAllForwarded := NewClientIPResolver(everything, HeaderForwarded)
	trustingNoHeader := NewClientIPResolver(everything, HeaderNone)
	f.Fuzz(func(t *testing.T, remote, xff, fwd string) {
		req := &http.Request{RemoteAddr: remote, Header: http.Header{}}
		if xff != "" {
			req.Header["X-Forwarded-For"] = strings.Split(xff, "\n")
		}
		if fwd != "" {
			req.Header["Forwarded"] = strings.Split(fwd, "\n")
		}
		peer := referencePeer(remote)

		if got := untrusting.ClientIP(req); got != peer {
			t.Fatalf("with no trusted proxies ClientIP = %v, want peer %v", got, peer)
		}

		if got := trustingNoHeader.ClientIP(req); got != peer {
			t.Fatalf("reading no header, ClientIP = %v, want peer %v", got, peer)
		}
		for _, r := range []*ClientIPResolver{trustingAll, trustingAllForwarded} {
			got := r.ClientIP(req)
			if got.IsValid() != peer.IsValid() {
				t.Fatalf("trusting all (%s): ClientIP = %v for peer %v; want valid exactly when the peer is", r.header, got, peer)
			}
			if got.Zone() != "" || got.Is4In6() {
				t.Fatalf("trusting all (%s): ClientIP = %v, want no zone and no IPv4-mapped form", r.header, got)
			}
		}
		// Each mode reads its own header only: the other one changes nothing.
		if fwd != "" {
			without := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": req.Header["X-Forwarded-For"]}}
			if got, want := trustingAll.ClientIP(req), trustingAll.ClientIP(without); got != want {
				t.Fatalf("X-Forwarded-For mode: Forwarded changed the client from %v to %v", want, got)
			}
		}
		if xff != "" {
			without := &http.Request{RemoteAddr: remote, Header: http.Header{"Forwarded": req.Header["Forwarded"]}}
			if got, want := trustingAllForwarded.ClientIP(req), trustingAllForwarded.ClientIP(without); got != want {
				t.Fatalf("Forwarded mode: X-Forwarded-For changed the client from %v to %v", want, got)
			}
		}
	})
}

// TestClientIPWarnsOfTheOtherHeader: a trusted peer whose request lacks
// the configured header but carries the other one is a proxy that writes
// the wrong header, behind which every client counts as the proxy: the
// resolver says so in the log once, naming both headers, however many
// such requests come. Requests that carry the configured header, come
// from an untrusted peer, carry neither header, or meet a resolver that
// reads none say nothing.
func TestClientIPWarnsOfTheOtherHeader(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	request := func(peer string, headers ...string) *http.Request {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = peer + ":1234"
		for i := 0; i < len(headers); i += 2 {
			req.Header.Add(headers[i], headers[i+1])
		}
		return req
	}
	for _, tc := range []struct {
		name       string
		header     ForwardedHeader
		req        *http.Request
		configured string // "" for no warning
		other      string
	}{
		{"forwarded configured, X-Forwarded-For sent", HeaderForwarded,
			request("10.0.0.1", "X-Forwarded-For", "203.0.113.9"), "Forwarded", "X-Forwarded-For"},
		{"x-forwarded-for configured, Forwarded sent", HeaderXForwardedFor,
			request("10.0.0.1", "Forwarded", "for=203.0.113.9"), "X-Forwarded-For", "Forwarded"},
		{"default header, Forwarded sent", "",
			request("10.0.0.1", "Forwarded", "for=203.0.113.9"), "X-Forwarded-For", "Forwarded"},
		{"both sent", HeaderForwarded,
			request("10.0.0.1", "X-Forwarded-For", "203.0.113.9", "Forwarded", "for=203.0.113.9"), "", ""},
		{"untrusted peer", HeaderForwarded,
			request("192.0.2.1", "X-Forwarded-For", "203.0.113.9"), "", ""},
		{"neither sent", HeaderForwarded, request("10.0.0.1"), "", ""},
		{"none configured", HeaderNone,
			request("10.0.0.1", "X-Forwarded-For", "203.0.113.9"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			r := NewClientIPResolver(trusted, tc.header)
			r.log = slog.New(slog.NewJSONHandler(&log, nil))
			peer := referencePeer(tc.req.RemoteAddr)
			for range 100 {
				if got := r.ClientIP(tc.req); tc.configured != "" && got != peer {
					t.Fatalf("ClientIP = %v, want the peer %v: the configured header is missing", got, peer)
				}
			}
			line := loggedOnce(t, log.String(), tc.configured != "")
			if line == nil {
				return
			}
			if line["level"] != "WARN" || line["configured_header"] != tc.configured || line["sent_header"] != tc.other ||
				line["proxy"] != peer.String() || !strings.Contains(line["msg"].(string), "XCLOAK_FORWARDED_HEADER") {
				t.Errorf("logged %v, want a warning naming %s, %s, the proxy %v and XCLOAK_FORWARDED_HEADER", line, tc.configured, tc.other, peer)
			}
		})
	}
}

// TestClientIPWarnsOfAnUnreadableHop: a trusted proxy whose own hop is no
// address (an obfuscated identifier such as "_hidden", or "unknown", which
// RFC 7239 allows and some proxies write by default) makes every client
// behind it the proxy: the resolver says so once, naming the proxy and the
// header. A hop a client wrote further left, which it may fill with
// anything, says nothing.
func TestClientIPWarnsOfAnUnreadableHop(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name, header, value string
		rh                  ForwardedHeader
		warn                bool
	}{
		{"obfuscated for=", "Forwarded", "for=_hidden;proto=https", HeaderForwarded, true},
		{"for=unknown", "Forwarded", `for="unknown"`, HeaderForwarded, true},
		{"X-Forwarded-For unknown", "X-Forwarded-For", "unknown", HeaderXForwardedFor, true},
		{"a client's junk behind a readable hop", "X-Forwarded-For", "junk, 10.0.0.7", HeaderXForwardedFor, false},
		{"a readable hop", "Forwarded", "for=203.0.113.9", HeaderForwarded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			r := NewClientIPResolver(trusted, tc.rh)
			r.log = slog.New(slog.NewJSONHandler(&log, nil))
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = "10.0.0.1:1234"
			req.Header.Set(tc.header, tc.value)
			for range 100 {
				r.ClientIP(req)
			}
			line := loggedOnce(t, log.String(), tc.warn)
			if line == nil {
				return
			}
			if line["level"] != "WARN" || line["proxy"] != "10.0.0.1" || line["header"] != tc.header ||
				strings.Contains(log.String(), "_hidden") {
				t.Errorf("logged %v, want a warning naming the proxy 10.0.0.1 and %s, not quoting the hop", line, tc.header)
			}
		})
	}
}

// loggedOnce checks that log, what 100 requests logged, is one JSON line
// if want, and returns it decoded; else that it is empty, and returns nil.
func loggedOnce(t *testing.T, log string, want bool) map[string]any {
	t.Helper()
	lines := slices.Collect(strings.Lines(log))
	if !want {
		if len(lines) != 0 {
			t.Errorf("logged %q, want nothing", lines)
		}
		return nil
	}
	if len(lines) != 1 {
		t.Fatalf("100 such requests logged %d lines, want one:\n%s", len(lines), log)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	return line
}

// TestParseNAT64Prefixes reads XCLOAK_NAT64_PREFIXES: IPv6 prefixes of the
// lengths RFC 6052 allows, host bits refused rather than masked (a typo
// would translate another network), and nothing else.
func TestParseNAT64Prefixes(t *testing.T) {
	got, err := ParseNAT64Prefixes(" 2001:db8:122:344::/96, ,3fff::/32 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("2001:db8:122:344::/96"), netip.MustParsePrefix("3fff::/32")}
	if !slices.Equal(got, want) {
		t.Errorf("ParseNAT64Prefixes = %v, want %v", got, want)
	}
	if got, err := ParseNAT64Prefixes(""); err != nil || got != nil {
		t.Errorf(`ParseNAT64Prefixes("") = %v, %v; want none`, got, err)
	}
	for _, bad := range []string{
		"2001:db8::/80",         // a length RFC 6052 does not define
		"2001:db8::1/96",        // host bits
		"192.0.2.0/24",          // IPv4
		"::ffff:0:0/96",         // IPv4-mapped: already the IPv4 address
		"2001:db8::",            // no length
		"2001:db8::/96, banana", // one bad entry of two
		"fe80::%eth0/64",
		"2001:db8:122:344:ff00::/96", // bits 64 to 71 set, which RFC 6052 reserves
	} {
		if _, err := ParseNAT64Prefixes(bad); err == nil {
			t.Errorf("ParseNAT64Prefixes(%q) succeeded", bad)
		} else if !strings.Contains(err.Error(), "nat64 prefix") {
			t.Errorf("ParseNAT64Prefixes(%q): %v does not name the setting's entry", bad, err)
		}
	}
}

// TestClientIPThroughATranslator: behind a translator of the operator's
// (SIIT, NAT64 with a network-specific prefix), an IPv4 client is that
// IPv4 address, whether it is the peer or a hop a trusted proxy names,
// rather than one of a single /64 every IPv4 client would share. Proxies
// are trusted by their own addresses, never by a translated one.
func TestClientIPThroughATranslator(t *testing.T) {
	r := NewClientIPResolver([]netip.Prefix{netip.MustParsePrefix("2001:db8:1::/48")}, "")
	r.translators = []netip.Prefix{netip.MustParsePrefix("2001:db8:122:344::/96")}
	for _, tt := range []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"the peer", "[2001:db8:122:344::c000:221]:443", nil, "192.0.2.33"},
		{"a hop", "[2001:db8:1::7]:443", []string{"2001:db8:122:344::c000:221"}, "192.0.2.33"},
		{"a bracketed hop with a port", "[2001:db8:1::7]:443", []string{"[2001:db8:122:344::c000:221]:4711"}, "192.0.2.33"},
		{"an IPv6 client", "[2001:db8:1::7]:443", []string{"2001:db8:5::1"}, "2001:db8:5::1"},
		{"outside the prefix", "[2001:db8:122:345::c000:221]:443", nil, "2001:db8:122:345::c000:221"},
		// A proxy whose address the translator's prefix holds is still
		// the proxy: trusted by it, it is not believed for 192.0.2.1.
		{"an untrusted peer in the prefix", "[2001:db8:122:344::c000:201]:443", []string{"198.51.100.9"}, "192.0.2.1"},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = tt.remote
		for _, v := range tt.xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		if got := r.ClientIP(req); got.String() != tt.want {
			t.Errorf("%s: ClientIP = %v, want %s", tt.name, got, tt.want)
		}
	}
}

// TestParseNAT64PrefixesRefusesOverlaps: an address under two listed
// prefixes, or under one and a prefix XCloak reads by itself (NAT64's
// well-known 64:ff9b::/96, IPv4-mapped ::ffff:0:0/96), would embed a different IPv4 address under each, and which one counted
// would depend on the order of the list: a /32 listed before a /96 inside
// it made every client of the /96's translator one IPv4 address, and
// 64:ff9b::/32 made every NAT64 client 0.0.0.0. Such a list is refused at
// start-up, naming both. The same prefix twice, or the well-known one,
// means nothing else and is taken once (the well-known one as XCloak
// reads it anyway). 6to4's 2002::/16 is no operator's translator, whose
// relays anyone may run (auth.CountedAddr), and is refused too.
func TestParseNAT64PrefixesRefusesOverlaps(t *testing.T) {
	for _, tt := range []struct{ list, names string }{
		{"2001:db8::/32, 2001:db8:122:344::/96", "2001:db8::/32"},
		{"2001:db8:122:344::/96, 2001:db8::/32", "2001:db8:122:344::/96"},
		{"64:ff9b::/32", "64:ff9b::/96"},
		{"64:ff9b::/64", "64:ff9b::/96"},
		{"2002:c000:200::/48", "2002::/16"},
		{"::/64", "::ffff:0.0.0.0/96"},
	} {
		_, err := ParseNAT64Prefixes(tt.list)
		if err == nil {
			t.Errorf("ParseNAT64Prefixes(%q) succeeded", tt.list)
			continue
		}
		if !strings.Contains(err.Error(), "nat64 prefix") || !strings.Contains(err.Error(), "overlaps "+tt.names) {
			t.Errorf("ParseNAT64Prefixes(%q): %v; want it to name the entry and %s", tt.list, err, tt.names)
		}
	}

	got, err := ParseNAT64Prefixes("2001:db8:64::/96, 64:ff9b::/96, 2001:db8:64::/96, 64:ff9b:1::/48")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("2001:db8:64::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	if !slices.Equal(got, want) {
		t.Errorf("ParseNAT64Prefixes = %v, want %v", got, want)
	}
}

// TestTrustedProxiesOverTranslators: a trusted prefix that holds a
// translator's prefix makes every IPv4 client that translator presents a
// trusted proxy, which names its own address in the forwarded header, as
// 0.0.0.0/0 would. RFC 6052 has a /96 built from a /64 and four zero
// octets, so trusting the /64 the proxies live in does it unawares.
// Such entries are found, for serve to warn of; one that names a proxy
// behind the translator (a /128, or an IPv4 /8 or narrower) is not.
func TestTrustedProxiesOverTranslators(t *testing.T) {
	parse := func(s string) []netip.Prefix {
		var ps []netip.Prefix
		for f := range strings.SplitSeq(s, ",") {
			ps = append(ps, netip.MustParsePrefix(strings.TrimSpace(f)))
		}
		return ps
	}
	translators := parse("2001:db8:64::/96, 2001:db8:100::/40, 2001:db8:122:300::/64")
	var got []string
	for _, w := range TrustedOverTranslators(parse(
		"2001:db8:64::/64, 2001:db8:64::c000:205/128, 2001:db8:64::a00:0/104, 2001:db8:64::/97, "+
			"2001:db8::/32, 2001:db8:100:ff00::/56, 2001:db8:122:300::/72, 2001:db8:122:300:ff00::/72, "+
			"64:ff9b::/64, 2002::/17, 10.0.0.0/8, 2001:db8:5::/48"), translators) {
		got = append(got, w.String())
	}
	want := []string{
		"2001:db8:64::/64 holds 0.0.0.0/0 through 2001:db8:64::/96",
		"2001:db8:64::/97 holds 0.0.0.0/1 through 2001:db8:64::/96",
		"2001:db8::/32 holds 0.0.0.0/0 through 2001:db8:64::/96",
		"2001:db8::/32 holds 0.0.0.0/0 through 2001:db8:100::/40",
		"2001:db8::/32 holds 0.0.0.0/0 through 2001:db8:122:300::/64",
		"2001:db8:122:300::/72 holds 0.0.0.0/0 through 2001:db8:122:300::/64",
		"64:ff9b::/64 holds 0.0.0.0/0 through 64:ff9b::/96",
	}
	if !slices.Equal(got, want) {
		t.Errorf("TrustedOverTranslators =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTranslatedNetworks: a network searched on the dashboard under a
// translator's prefix, the operator's or the well-known one, is the IPv4
// network its addresses embed, as the events record them; searched as
// written, an IPv6 network under it found nothing.
func TestTranslatedNetworks(t *testing.T) {
	s := &Server{cfg: Config{NAT64Prefixes: []netip.Prefix{
		netip.MustParsePrefix("2001:db8:64::/96"), netip.MustParsePrefix("2001:db8:122::/48")}}}
	for in, want := range map[string]string{
		"2001:db8:64::c000:200/120":   "192.0.2.0/24",
		"64:ff9b::c000:200/120":       "192.0.2.0/24",
		"2001:db8:122:c000:2::/80":    "192.0.2.0/24",
		"2001:db8:122:c000::/64":      "192.0.0.0/16",
		"2001:db8:64::/96":            "0.0.0.0/0",
		"2001:db8:64::c000:221":       "192.0.2.33",
		"2001:db8:5::/64":             "2001:db8:5::/64",
		"2001:db8::/32":               "2001:db8::/32",
		"2001:db8:64::/64":            "2001:db8:64::/64", // wider than its translator's
		"64:ff9b::/64":                "64:ff9b::/64",
		"2001:db8:122:c000:ff00::/72": "2001:db8:122:c000:ff00::/72",
		"unknown":                     "unknown",
		"2001:db8:64::c000:221%eth0":  "2001:db8:64::c000:221%eth0",
	} {
		if got := s.translated(in); got != want {
			t.Errorf("translated(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestClientIPWarnsOfASuffix: RFC 6052 has the bits after the IPv4
// address zero, and a translator writes them so. A client whose suffix is
// not zero is read under a prefix shorter than its translator's: the
// local-use block 64:ff9b:1::/48 listed for a translator of
// 64:ff9b:1::/96 reads every client of it as 0.0.0.0, one address whose
// limits refuse them all. That is said once; clients with a zero suffix
// say nothing.
func TestClientIPWarnsOfASuffix(t *testing.T) {
	request := func(peer string) *http.Request {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "[" + peer + "]:1234"
		return req
	}
	var log bytes.Buffer
	r := NewClientIPResolver(nil, "")
	r.log = slog.New(slog.NewJSONHandler(&log, nil))
	r.translators = []netip.Prefix{netip.MustParsePrefix("2001:db8:122::/48"), netip.MustParsePrefix("64:ff9b:1::/48")}
	if got := r.ClientIP(request("2001:db8:122:c000:2:2100::")); got.String() != "192.0.2.33" {
		t.Fatalf("ClientIP = %v, want 192.0.2.33", got)
	}
	if log.Len() != 0 {
		t.Fatalf("a zero suffix logged %s", log.String())
	}
	for _, peer := range []string{"64:ff9b:1::c000:201", "64:ff9b:1::c000:202", "2001:db8:122:c000:2:2100:0:1"} {
		r.ClientIP(request(peer))
	}
	lines := slices.Collect(strings.Lines(log.String()))
	if len(lines) != 1 {
		t.Fatalf("logged %d lines, want one:\n%s", len(lines), log.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line["level"] != "WARN" || line["prefix"] != "64:ff9b:1::/48" || line["client"] != "64:ff9b:1::c000:201" ||
		line["read_as"] != "0.0.0.0" || !strings.Contains(line["msg"].(string), "XCLOAK_NAT64_PREFIXES") {
		t.Errorf("logged %v", line)
	}
}

// TestZeroSuffixAtEveryLength: the suffix after the embedded IPv4 address
// begins where RFC 6052 puts it for each prefix length (past bits 64 to
// 71, the u octet, for the /32), and any of its bytes set is seen.
func TestZeroSuffixAtEveryLength(t *testing.T) {
	for bits, first := range map[int]int{32: 9, 40: 10, 48: 11, 56: 12, 64: 13} {
		var b [16]byte
		b[0], b[1] = 0x20, 0x01
		p := netip.PrefixFrom(netip.AddrFrom16(b), bits)
		// 192.0.2.33 in the bytes RFC 6052 gives it, the u octet skipped.
		at := bits / 8
		for _, v := range []byte{192, 0, 2, 33} {
			if at == 8 {
				at++
			}
			b[at] = v
			at++
		}
		if addr := netip.AddrFrom16(b); !zeroSuffix(addr, p) {
			t.Errorf("/%d: %v read as having a suffix", bits, addr)
		}
		for _, i := range []int{first, 15} {
			c := b
			c[i] = 1
			if addr := netip.AddrFrom16(c); zeroSuffix(addr, p) {
				t.Errorf("/%d: %v (byte %d set) read as without a suffix", bits, addr, i)
			}
		}
	}
}

// FuzzClientIPBehindAProxy: whatever a client sends in either header, on
// however many lines, a trusted proxy that appends the address it saw
// (nginx's $proxy_add_x_forwarded_for joins the client's lines into one
// and appends to it; HAProxy adds a line of its own) makes that address
// the client, in both modes. Only the proxy vouches for its hop; nothing
// to its left can move it, hide it or stand in for it.
func FuzzClientIPBehindAProxy(f *testing.F) {
	for _, s := range []struct {
		sent   string
		client []byte
	}{
		{"10.0.0.5", []byte{203, 0, 113, 9}},
		{`for="1.2.3.4, for=10.0.0.5`, []byte{203, 0, 113, 9}},
		{"for=10.0.0.5;x=\"\\\", for=unknown\n\"", []byte{0x20, 1, 0xd, 0xb8, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{strings.Repeat("10.0.0.5, ", 600), []byte{198, 51, 100, 7}},
		{"_hidden;\\", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4}},
	} {
		f.Add(s.sent, s.client, false)
		f.Add(s.sent, s.client, true)
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	modes := []ForwardedHeader{HeaderXForwardedFor, HeaderForwarded}
	resolvers := []*ClientIPResolver{NewClientIPResolver(trusted, modes[0]), NewClientIPResolver(trusted, modes[1])}
	f.Fuzz(func(t *testing.T, sent string, client []byte, newLine bool) {
		addr, ok := netip.AddrFromSlice(client)
		if !ok {
			return
		}
		// The proxy writes the peer it saw, as parsePeer reads one.
		addr = addr.Unmap()
		if slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(addr) }) {
			return // a client among the proxies is one of them
		}
		for i, r := range resolvers {
			name := "X-Forwarded-For"
			hop := addr.String()
			if modes[i] == HeaderForwarded {
				name = "Forwarded"
				hop = "for=" + hop
				if addr.Is6() {
					hop = `for="[` + addr.String() + `]"`
				}
			}
			lines := strings.Split(sent, "\n")
			if newLine {
				lines = append(lines, hop)
			} else {
				lines = []string{strings.Join(lines, ", ") + ", " + hop}
			}
			req := &http.Request{RemoteAddr: "10.0.0.1:443", Header: http.Header{name: lines}}
			if got := r.ClientIP(req); got != addr {
				t.Fatalf("%s %q, the proxy's hop %s last: ClientIP = %v, want %v", name, lines, hop, got, addr)
			}
		}
	})
}
