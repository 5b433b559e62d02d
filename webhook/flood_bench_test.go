package webhook_test

import (
	"net/url"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/webhook"
)

// BenchmarkEventsWrittenFlood is the cost, on the event writer's
// goroutine, of a lockout heard while two receivers' queues are full (a
// flood of lockouts, the receivers down): the path a stuffing attack
// drives. Nothing is kept past the queues.
func BenchmarkEventsWrittenFlood(b *testing.B) {
	urls := make([]*url.URL, 2)
	for i, raw := range []string{"https://a.example/hook", "https://b.example/hook"} {
		u, err := url.Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		urls[i] = u
	}
	s, err := webhook.New(webhook.Config{URLs: urls, Secret: secret, Queue: 1000}, webhook.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	rows := []auth.Event{lockout("ann@example.com")}
	for range 1000 { // fill the queues: never run, they stay full
		s.EventsWritten(rows)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.EventsWritten(rows)
	}
}
