package web_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// BenchmarkHeldCodeTiming times a wrong code on the held answers to the
// right password of an account with a factor, to a wrong password, to an
// account that does not exist and to the right password of an account
// without a factor, interleaved, and reports each case's median and the
// gap between the extremes: the held step does the same work in every
// case, so they should be alike (docs/BENCHMARKS.md).
//
//	go test -run '^$' -bench BenchmarkHeldCodeTiming -benchtime 600x ./web/
func BenchmarkHeldCodeTiming(b *testing.B) {
	env := xcloaktest.New(b, xcloaktest.Options{Auth: func(c *auth.Config) {
		c.NotifyNewDevice = false
		c.Limits.SetCount(auth.RuleMFAAccount, 100_000)
		c.Limits.SetCount(auth.RuleMFANetwork, 100_000)
	}})
	ctx := b.Context()
	const email, password = "ann@example.com", "the password"
	env.AddUser(b, email, password, false)
	env.AddUser(b, "bob@example.com", password, false)
	owner := auth.Client{Addr: netip.MustParseAddr("127.0.41.1")}
	res, err := env.Service.Login(ctx, auth.LoginRequest{Email: email, Password: password, Client: owner})
	if err != nil {
		b.Fatal(err)
	}
	e, err := env.Service.BeginTOTP(ctx, res.Session, auth.Client{Addr: netip.MustParseAddr("192.0.2.200")})
	if err != nil {
		b.Fatal(err)
	}
	code, err := totp.GenerateCode(e.Secret, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := env.Service.ConfirmTOTP(ctx, auth.FactorChange{Session: res.Session.Token, Password: password, Client: owner}, e.ID, code); err != nil {
		b.Fatal(err)
	}
	if _, err := env.Attack.SwitchAttack(ctx, true, "benchmark"); err != nil {
		b.Fatal(err)
	}
	cases := []struct{ name, email, password string }{
		{"right", email, password},
		{"wrong", email, "not the password"},
		{"unknown", "nobody@example.com", password},
		{"nofactor", "bob@example.com", password},
	}
	steps := make([]auth.MFAStep, len(cases))
	client := auth.Client{Addr: netip.MustParseAddr("127.0.41.2")}
	for i, c := range cases {
		res, err := env.Service.Login(ctx, auth.LoginRequest{Email: c.email, Password: c.password, Client: client})
		if !errors.Is(err, auth.ErrVerificationRequired) || res.MFA.Token == "" {
			b.Fatalf("%s: %v, token %q; want held with a token", c.name, err, res.MFA.Token)
		}
		steps[i] = res.MFA
	}
	took := make([][]time.Duration, len(cases))
	next := roundOrders(len(cases)) // each round in an order of its own
	for b.Loop() {
		for _, j := range next() {
			wrong := "000000"
			if now, _ := totp.GenerateCode(e.Secret, time.Now()); now == wrong {
				wrong = "111111"
			}
			start := time.Now()
			_, err := env.Service.SecondStep(ctx, auth.SecondStepRequest{Token: steps[j].Token, Binding: steps[j].Binding, Code: wrong, Client: client})
			took[j] = append(took[j], time.Since(start))
			if !errors.Is(err, auth.ErrInvalidCode) {
				b.Fatalf("%s: %v; want ErrInvalidCode", cases[j].name, err)
			}
		}
	}
	var medians []time.Duration
	for j, c := range cases {
		m := median(took[j])
		medians = append(medians, m)
		b.ReportMetric(float64(m)/float64(time.Microsecond), c.name+"-median-µs")
	}
	lo, hi := slices.Min(medians), slices.Max(medians)
	b.ReportMetric(100*float64(hi-lo)/float64(lo), "gap-%")
	b.ReportMetric(0, "ns/op")
}
