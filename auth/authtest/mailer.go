package authtest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// Mailer is an auth.Mailer that keeps what it is handed. The zero value is
// ready.
type Mailer struct {
	mu   sync.Mutex
	sent []auth.Message
	// more is closed, and replaced, at each Send, to wake WaitFor.
	more chan struct{}
}

var _ auth.Mailer = (*Mailer)(nil)

// Send keeps m, refusing what auth.Message.Validate refuses, as every
// Mailer should.
func (m *Mailer) Send(_ context.Context, msg auth.Message) error {
	if err := msg.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, msg)
	if m.more != nil {
		close(m.more)
		m.more = nil
	}
	return nil
}

// Sent returns the messages sent so far, oldest first.
func (m *Mailer) Sent() []auth.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sent)
}

// mailWait bounds how long WaitFor waits for mail that the service sends
// from its background workers; it only ends a test that would hang.
const mailWait = 20 * time.Second

// WaitFor returns the first message sent to to, waiting for the service's
// mail workers if none is there yet; the test fails if none comes.
func (m *Mailer) WaitFor(t testing.TB, to string) auth.Message {
	t.Helper()
	deadline := time.NewTimer(mailWait)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		i := slices.IndexFunc(m.sent, func(msg auth.Message) bool { return strings.EqualFold(msg.To, to) })
		if i >= 0 {
			msg := m.sent[i]
			m.mu.Unlock()
			return msg
		}
		if m.more == nil {
			m.more = make(chan struct{})
		}
		more := m.more
		m.mu.Unlock()
		select {
		case <-more:
		case <-deadline.C:
			t.Fatalf("no mail to %s after %v; %d sent to others", to, mailWait, len(m.Sent()))
		}
	}
}

// InvalidMessages are messages every Mailer must refuse before anything is
// sent: each would let a recipient or a header be injected, or names no
// single address. Tests of every Mailer range over them.
var InvalidMessages = []struct {
	Name string
	Msg  auth.Message
}{
	{"CRLF in To adds a Bcc", auth.Message{To: "ada@example.com\r\nBcc: eve@example.com", Subject: "s", Body: "b"}},
	{"LF in To", auth.Message{To: "ada@example.com\nBcc: eve@example.com", Subject: "s", Body: "b"}},
	{"CR in Subject", auth.Message{To: "ada@example.com", Subject: "s\rBcc: eve@example.com", Body: "b"}},
	{"LF in Subject", auth.Message{To: "ada@example.com", Subject: "s\nBcc: eve@example.com", Body: "b"}},
	{"two recipients", auth.Message{To: "ada@example.com, eve@example.com", Subject: "s", Body: "b"}},
	{"group", auth.Message{To: "friends: ada@example.com, eve@example.com;", Subject: "s", Body: "b"}},
	{"not an address", auth.Message{To: "ada", Subject: "s", Body: "b"}},
	{"empty To", auth.Message{To: " ", Subject: "s", Body: "b"}},
	// One string without spaces, as an account's address could be stored
	// before such addresses were refused, that mail reads as another.
	{"a display name before another address", auth.Message{To: "ada<eve@example.com>", Subject: "s", Body: "b"}},
	{"a comment after the address", auth.Message{To: "ada@example.com(eve@example.com)", Subject: "s", Body: "b"}},
	{"a quoted local part", auth.Message{To: `"eve@example.com"@example.com`, Subject: "s", Body: "b"}},
}
