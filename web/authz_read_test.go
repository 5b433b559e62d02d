package web

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzOriginalRequest: whatever a trusted proxy's headers say, reading
// them does not panic, and the host judged is a DNS name in lower case
// that is the host of the URL the browser is sent back to (rd), as a
// browser reads it, so that a sign-in never returns anywhere but the
// host the answer was about.
func FuzzOriginalRequest(f *testing.F) {
	for _, s := range [][4]string{
		{"https", "app.example.com", "/docs?page=2", "https://app.example.com/docs?page=2"},
		{"HTTP", "APP.example.com:8443", "//evil.example", "https://evil@app.example.com/"},
		{"https", "app.example.com, evil.example", "/\\evil.example", "https://app.example.com\\@evil.example/"},
		{"https", "[app.example.com]:443", "", "https://app%2eexample.com/"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, proto, host, uri, original string) {
		check := func(which, rd, judged string) {
			if judged == "" || hostOnly(judged) != judged {
				t.Fatalf("%s: judged %q, no DNS name in lower case", which, judged)
			}
			scheme, browserHost, absolute := browserReading(rd)
			if !absolute || scheme != "http" && scheme != "https" || browserHost != judged {
				t.Fatalf("%s: judged %q, rd %q, which a browser reads as %s://%s", which, judged, rd, scheme, browserHost)
			}
		}
		r := &http.Request{Header: http.Header{}}
		for name, v := range map[string]string{"X-Forwarded-Proto": proto, "X-Forwarded-Host": host, "X-Forwarded-Uri": uri} {
			r.Header[name] = strings.Split(v, "\n")
		}
		if rd, judged, ok := forwardedRequest(r); ok {
			check("X-Forwarded-*", rd, judged)
		}
		r.Header = http.Header{"X-Original-Url": strings.Split(original, "\n")}
		if rd, judged, ok := originalURLRequest(r); ok {
			check("X-Original-URL", rd, judged)
		}
	})
}
