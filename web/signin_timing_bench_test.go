package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// BenchmarkSignInTiming times the plain sign-in's 401s through the real
// HTTP handler, on the real stores, with the production hashing
// parameters, from the JSON API and from the form: a wrong password, an
// unknown account, a disabled account's right and wrong passwords, and a
// wrong password of an account with an authenticator app
// (plainSignInCases); and, on a second server whose lockout comes after
// three failures, the 429s of an account so locked and of an unknown
// account sent as many wrong passwords. Every case runs once a round, in
// an order shuffled each round, so that the machine's noise, and what
// ran just before, fall on all alike. It reports each case's median and
// 90th percentile, and for each front end's 401s, and its 429s, the
// largest gap between two medians as a percentage of the smallest; the
// target is under 10.
//
//	go test -run '^$' -bench SignInTiming -benchtime 100x -count 3 ./web/
func BenchmarkSignInTiming(b *testing.B) {
	hasher, err := auth.NewHasher(auth.DefaultParams, 2, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	// Nothing but the sign-in itself refuses the 401s' cases: each is
	// asked hundreds of times from one address.
	open := signInOracleEnv(b, xcloaktest.Options{Hasher: hasher, Auth: func(c *auth.Config) {
		for _, r := range []string{auth.RuleLoginIP, auth.RuleLoginNetwork, auth.RuleLoginSite, auth.RuleLoginAccount} {
			c.Limits.SetCount(r, 100_000)
		}
		c.Lockout.Threshold = 100_000
	}})
	const threshold = 3
	locking := xcloaktest.New(b, xcloaktest.Options{Hasher: hasher, Auth: func(c *auth.Config) {
		for _, r := range []string{auth.RuleLoginIP, auth.RuleLoginNetwork, auth.RuleLoginSite} {
			c.Limits.SetCount(r, 100_000)
		}
		c.Lockout.Threshold = threshold
	}})
	locking.AddUser(b, plainEmail, plainPassword, false)

	type signIn struct {
		name  string
		env   *xcloaktest.Env
		front string
		api   bool
		email string
		pass  string
		want  int
	}
	var cases []signIn
	for _, api := range []bool{true, false} {
		front := "form"
		if api {
			front = "api"
		}
		for _, c := range plainSignInCases() {
			name := front + "-" + strings.NewReplacer(", ", "-", " ", "-").Replace(c.name)
			cases = append(cases, signIn{name, open, front, api, c.email, c.password, http.StatusUnauthorized})
		}
		cases = append(cases,
			signIn{front + "-locked", locking, front, api, plainEmail, plainPassword, http.StatusTooManyRequests},
			signIn{front + "-locked-unknown", locking, front, api, unknownEmail, plainPassword, http.StatusTooManyRequests})
	}
	serve := func(c signIn) (int, time.Duration) {
		var req *http.Request
		if c.api {
			req = httptest.NewRequest(http.MethodPost, "/api/v1/login", strings.NewReader(loginJSON(c.email, c.pass)))
			req.Header.Set("Content-Type", jsonType)
		} else {
			req = httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"email": {c.email}, "password": {c.pass}}.Encode()))
			req.Header.Set("Content-Type", formType)
		}
		req.RemoteAddr = "127.0.44.1:40000"
		rec := httptest.NewRecorder()
		start := time.Now()
		c.env.Handler.ServeHTTP(rec, req)
		return rec.Code, time.Since(start)
	}
	// Both accounts of the second server locked, by as many wrong
	// passwords each.
	for k := range threshold {
		for _, email := range []string{plainEmail, unknownEmail} {
			serve(signIn{env: locking, api: true, email: email, pass: fmt.Sprintf("wrong password %d", k)})
		}
	}

	took := make([][]time.Duration, len(cases))
	next := roundOrders(len(cases)) // each round in an order of its own
	for b.Loop() {
		for _, j := range next() {
			code, d := serve(cases[j])
			took[j] = append(took[j], d)
			if code != cases[j].want {
				b.Fatalf("%s: %d, want %d", cases[j].name, code, cases[j].want)
			}
		}
	}
	// The front ends' answers differ, and so do their times: each one's
	// 401s are compared with each other, and its 429s.
	groups := map[string][]time.Duration{}
	for j, c := range cases {
		m, p90 := percentile(took[j], 50), percentile(took[j], 90)
		group := fmt.Sprintf("%s-%d", c.front, c.want)
		groups[group] = append(groups[group], m)
		unit, scale := "ms", time.Millisecond
		if c.want == http.StatusTooManyRequests {
			unit, scale = "µs", time.Microsecond
		}
		b.ReportMetric(float64(m)/float64(scale), c.name+"-median-"+unit)
		b.ReportMetric(float64(p90)/float64(scale), c.name+"-p90-"+unit)
	}
	for group, ms := range groups {
		lo, hi := slices.Min(ms), slices.Max(ms)
		b.ReportMetric(100*float64(hi-lo)/float64(lo), "gap-"+group+"-%")
	}
	b.ReportMetric(0, "ns/op")
}

// percentile is the p-th percentile of ds, by rank.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
