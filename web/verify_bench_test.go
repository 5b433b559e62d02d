package web_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// BenchmarkVerificationTiming times held sign-ins through the real HTTP
// handler, on the real stores, with the production hashing parameters:
// the right password, a wrong one and an unknown account, interleaved in
// one loop (each round in an order of its own, roundOrders) so that the machine's noise
// falls on all alike; and the same three typed with a full-width letter,
// which NFKC normalisation changes (a password typed so costs two hashes,
// the normalised form and the form as typed, right or wrong). The mail a
// right password queues is sent before the next request starts. It
// reports each case's median in milliseconds and, for each way of typing,
// the largest gap between two of its medians as a percentage of the
// smallest; the target is under 10.
//
//	go test -run '^$' -bench VerificationTiming -benchtime 200x ./web/
func BenchmarkVerificationTiming(b *testing.B) {
	hasher, err := auth.NewHasher(auth.DefaultParams, 2, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	env := xcloaktest.New(b, xcloaktest.Options{Hasher: hasher, Auth: func(c *auth.Config) {
		c.NewDeviceVerification = auth.VerifyAlways
		for _, r := range []string{auth.RuleLoginIP, auth.RuleLoginNetwork, auth.RuleLoginAccount, auth.RuleResetDomain, auth.RuleVerifyMailAccount} {
			c.Limits.SetCount(r, 100_000)
		}
		c.Lockout.Threshold = 100_000
	}})
	env.AddUser(b, "ann@example.com", "the password", false)
	cases := []struct{ name, typed, body string }{
		{"right", "", loginJSON("ann@example.com", "the password")},
		{"wrong", "", loginJSON("ann@example.com", "not the password")},
		{"unknown", "", loginJSON("nobody@example.com", "the password")},
		{"right-fullwidth", "fullwidth", loginJSON("ann@example.com", "ｔhe password")},
		{"wrong-fullwidth", "fullwidth", loginJSON("ann@example.com", "ｎot the password")},
		{"unknown-fullwidth", "fullwidth", loginJSON("nobody@example.com", "ｔhe password")},
	}
	took := make([][]time.Duration, len(cases))
	next := roundOrders(len(cases)) // each round in an order of its own
	for b.Loop() {
		for _, j := range next() {
			req := httptest.NewRequest(http.MethodPost, "/api/v1/login", strings.NewReader(cases[j].body))
			req.Header.Set("Content-Type", jsonType)
			req.RemoteAddr = "127.0.30.1:40000"
			rec := httptest.NewRecorder()
			start := time.Now()
			env.Handler.ServeHTTP(rec, req)
			took[j] = append(took[j], time.Since(start))
			if rec.Code != http.StatusAccepted {
				b.Fatalf("%s: %d %s", cases[j].name, rec.Code, rec.Body)
			}
			if strings.HasPrefix(cases[j].name, "right") {
				// The mail's work follows the answer; it is let finish
				// before the next request, so that each request is timed
				// alone (docs/SECURITY-MODEL.md says what it costs the
				// requests that follow).
				env.Mail.WaitFor(b, "ann@example.com")
			}
		}
	}
	medians := map[string][]time.Duration{}
	for j, c := range cases {
		m := median(took[j])
		medians[c.typed] = append(medians[c.typed], m)
		b.ReportMetric(float64(m)/float64(time.Millisecond), c.name+"-median-ms")
	}
	for typed, ms := range medians {
		lo, hi := slices.Min(ms), slices.Max(ms)
		unit := "gap-%"
		if typed != "" {
			unit = "gap-" + typed + "-%"
		}
		b.ReportMetric(100*float64(hi-lo)/float64(lo), unit)
	}
	b.ReportMetric(0, "ns/op")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
