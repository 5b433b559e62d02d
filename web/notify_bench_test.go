package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// BenchmarkNewDeviceNoticeCost times the answer to a sign-in from a new
// browser with the new-device notice on and off, interleaved in one run
// so that the machine's noise falls on both alike. With it on, the
// notice's mail is let finish before the next request, so that each
// answer is timed alone: what it measures is what queueing the notice
// adds to the sign-in itself.
func BenchmarkNewDeviceNoticeCost(b *testing.B) {
	envs := make([]*xcloaktest.Env, 2)
	for i, on := range []bool{false, true} {
		envs[i] = xcloaktest.New(b, xcloaktest.Options{Auth: func(c *auth.Config) {
			c.NotifyNewDevice = on
			for _, r := range []string{auth.RuleLoginIP, auth.RuleLoginNetwork, auth.RuleLoginAccount, auth.RuleResetDomain} {
				c.Limits.SetCount(r, 100_000)
			}
		}})
		envs[i].AddUser(b, "ann@example.com", "the password", false)
	}
	names := []string{"off", "on"}
	took := make([][]time.Duration, 2)
	for i := 0; b.Loop(); i++ {
		for k := range envs {
			j := (i + k) % 2
			req := httptest.NewRequest(http.MethodPost, "/api/v1/login", strings.NewReader(loginJSON("ann@example.com", "the password")))
			req.Header.Set("Content-Type", jsonType)
			req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0")
			req.RemoteAddr = "127.0.31.1:40000"
			rec := httptest.NewRecorder()
			start := time.Now()
			envs[j].Handler.ServeHTTP(rec, req)
			took[j] = append(took[j], time.Since(start))
			if rec.Code != http.StatusOK {
				b.Fatalf("notice %s: %d %s", names[j], rec.Code, rec.Body)
			}
			if j == 1 {
				envs[j].Mail.WaitFor(b, "ann@example.com")
			}
		}
	}
	for j, name := range names {
		b.ReportMetric(float64(median(took[j]))/float64(time.Millisecond), "notice-"+name+"-median-ms")
	}
	b.ReportMetric(0, "ns/op")
}
