package auth_test

import (
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

func TestDescribeBrowser(t *testing.T) {
	for _, tc := range []struct{ ua, want string }{
		{"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox on Linux"},
		{"Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0", "Firefox on Linux"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", "Chrome on Windows"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", "Edge on Windows"},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36", "Chrome on Android"},
		{"Mozilla/5.0 (Linux; Android 13; SM-S908B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36", "Samsung Internet on Android"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "Safari on iPhone"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/126.0.6478.54 Mobile/15E148 Safari/604.1", "Chrome on iPhone"},
		{"Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/127.0 Mobile/15E148 Safari/605.1.15", "Firefox on iPad"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "Safari on macOS"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 OPR/111.0.0.0", "Opera on macOS"},
		{"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", "Chrome on ChromeOS"},
		{"curl/8.5.0", "curl"},
		{"Go-http-client/1.1", auth.UnknownBrowser},
		{"", auth.UnknownBrowser},
		{"Mozilla/5.0 (Windows NT 10.0) <script>alert(1)</script>", "a browser on Windows"},
		{"\x00\xff\xfe<b>Firefox/1</b>", "Firefox"},
		// Only the first 512 bytes are read: a name past them is not seen.
		{strings.Repeat("A", 512) + "Firefox/128.0 (X11; Linux)", auth.UnknownBrowser},
	} {
		if got := auth.DescribeBrowser(tc.ua); got != tc.want {
			t.Errorf("DescribeBrowser(%.60q) = %q, want %q", tc.ua, got, tc.want)
		}
	}
}

// TestDescribeBrowserEchoesNothing: whatever the header, the description
// is made of the parser's own words, never of the header's bytes.
func TestDescribeBrowserEchoesNothing(t *testing.T) {
	for _, ua := range []string{"<script>x</script> Firefox/1 on \"Linux\"", strings.Repeat("Chrome/ ", 100000), "Opera\n\rInjected: yes"} {
		got := auth.DescribeBrowser(ua)
		if strings.ContainsAny(got, "<>\"\n\r/") || len(got) > 64 {
			t.Errorf("DescribeBrowser(%.40q) = %q: carries the header's bytes or is unbounded", ua, got)
		}
	}
}

func BenchmarkDescribeBrowser(b *testing.B) {
	for _, bc := range []struct{ name, ua string }{
		{"chrome", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"},
		{"oversize", strings.Repeat("x", 1<<16)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				auth.DescribeBrowser(bc.ua)
			}
		})
	}
}
