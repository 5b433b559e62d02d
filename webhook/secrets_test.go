package webhook_test

import (
	"bytes"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/webhook"
)

// logBuffer is a log's output, safe for the Sender's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogsQuoteNoPathNorQuery: a receiver's URL often carries its own
// token in its path or query (as chat services' incoming hooks do); the
// Sender's log lines name only its scheme and host, even when the error
// of a failed attempt (a *url.Error) quotes the whole URL.
func TestLogsQuoteNoPathNorQuery(t *testing.T) {
	for _, tc := range []struct {
		name string
		dead func(t *testing.T) *receiver
	}{
		{"refused", func(t *testing.T) *receiver {
			r := newReceiver(t, nil)
			r.srv.Close() // nothing listens there any more
			return r
		}},
		{"no answer in time", hanging},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.dead(t)
			u, err := url.Parse(r.srv.URL + "/services/PATHTOKEN?token=QUERYTOKEN")
			if err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			reg := prometheus.NewRegistry()
			s, err := webhook.New(webhook.Config{URLs: []*url.URL{u}, Secret: secret, Attempts: 2, Timeout: 50 * time.Millisecond},
				webhook.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: reg, Sleep: (&waits{}).sleep})
			if err != nil {
				t.Fatal(err)
			}
			ss := &sender{Sender: s, reg: reg}
			stop := ss.run(t)
			s.EventsWritten([]auth.Event{lockout("ann@example.com")})
			for ss.metric(t, "xcloak_webhook_deliveries_total", "failed") == 0 {
				time.Sleep(time.Millisecond)
			}
			stop()
			out := logs.String()
			if !strings.Contains(out, "giving up") {
				t.Fatalf("no line for the failure in the log:\n%s", out)
			}
			for _, secret := range []string{"PATHTOKEN", "QUERYTOKEN"} {
				if strings.Contains(out, secret) {
					t.Errorf("the log quotes the URL's %s:\n%s", secret, out)
				}
			}
		})
	}
}
