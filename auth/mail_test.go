package auth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/app"
)

func TestLogMailer(t *testing.T) {
	var buf bytes.Buffer
	mailer := auth.LogMailer{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	msg := auth.Message{
		To:      "ada@example.com",
		Subject: "Reset your XCloak password",
		Body:    "Open https://xcloak.example/reset?token=abc==&x=1 to continue.\n",
	}
	if err := mailer.Send(t.Context(), msg); err != nil {
		t.Fatalf("Send: %v", err)
	}

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log records = %d, want 1:\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["level"] != "WARN" {
		t.Errorf("level = %v, want WARN", rec["level"])
	}
	if m, _ := rec["msg"].(string); !strings.Contains(m, "not configured") {
		t.Errorf("msg = %q, want it to say mail is not configured", m)
	}
	for key, want := range map[string]string{"to": msg.To, "subject": msg.Subject, "body": msg.Body} {
		if rec[key] != want {
			t.Errorf("%s = %q, want %q", key, rec[key], want)
		}
	}

	for _, tt := range authtest.InvalidMessages {
		t.Run(tt.Name, func(t *testing.T) {
			buf.Reset()
			if err := mailer.Send(t.Context(), tt.Msg); !errors.Is(err, auth.ErrInvalidMessage) {
				t.Errorf("Send error = %v, want ErrInvalidMessage", err)
			}
			if buf.Len() != 0 {
				t.Errorf("refused message was logged: %s", buf.String())
			}
		})
	}
}

// recordingMailer accepts every message, as a Mailer that checks nothing
// would, and keeps what it was given.
type recordingMailer struct {
	mu   sync.Mutex
	sent []auth.Message
}

func (m *recordingMailer) Send(_ context.Context, msg auth.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, msg)
	return nil
}

// TestServiceValidatesEveryMessage: the service refuses a message that could
// inject a header or a recipient even when its Mailer would send anything.
func TestServiceValidatesEveryMessage(t *testing.T) {
	rec := &recordingMailer{}
	f := newFixture(t, nil, func(d *app.Deps) { d.Mailer = rec })
	for _, tt := range authtest.InvalidMessages {
		t.Run(tt.Name, func(t *testing.T) {
			if err := auth.SendMail(t.Context(), f.svc, tt.Msg); !errors.Is(err, auth.ErrInvalidMessage) {
				t.Errorf("Send error = %v, want ErrInvalidMessage", err)
			}
		})
	}
	if len(rec.sent) != 0 {
		t.Errorf("the Mailer was handed %d refused messages: %+v", len(rec.sent), rec.sent)
	}
	valid := auth.Message{To: "ada@example.com", Subject: "s", Body: "b"}
	if err := auth.SendMail(t.Context(), f.svc, valid); err != nil {
		t.Fatalf("Send of a valid message: %v", err)
	}
	if len(rec.sent) != 1 || rec.sent[0] != valid {
		t.Errorf("the Mailer was handed %+v, want [%+v]", rec.sent, valid)
	}
}

// The Mailer interface is what callers hold; LogMailer must satisfy it.
var _ auth.Mailer = auth.LogMailer{}

// TestMailsSayLinkLifeInWords: a mailed link's lifetime is written for
// its reader ("30 minutes"), as the page that sent it says it, not in
// Go's notation ("30m0s").
func TestMailsSayLinkLifeInWords(t *testing.T) {
	f := newFixture(t, nil)
	f.addUser(t, "ann@example.com", "correct horse", false)
	if err := f.svc.RequestReset(t.Context(), "ann@example.com", client("198.51.100.20")); err != nil {
		t.Fatal(err)
	}
	body := f.mailBody(t, "ann@example.com")
	if !strings.Contains(body, "within 30 minutes") || strings.Contains(body, "m0s") {
		t.Errorf("reset mail does not give the link's life in words:\n%s", body)
	}
}

func TestLinkLife(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Minute:                     "1 minute",
		30 * time.Minute:                "30 minutes",
		90 * time.Minute:                "90 minutes",
		time.Hour:                       "1 hour",
		168 * time.Hour:                 "168 hours",
		30*time.Minute + 30*time.Second: "30 minutes",
		45 * time.Second:                "45 seconds",
		0:                               "1 second",
	} {
		if got := auth.LinkLife(d); got != want {
			t.Errorf("LinkLife(%s) = %q, want %q", d, got, want)
		}
	}
}
