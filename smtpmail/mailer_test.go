package smtpmail_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/smtpmail"
)

func TestMailerDelivers(t *testing.T) {
	// Longer than the 76 characters a quoted-printable line may hold, and
	// full of '=' and '?', so the encoding has to escape and soft-break it.
	link := "https://xcloak.example/reset?token=" + strings.Repeat("Zm9vYmFy", 12) + "==&next=%2Fhome%3Fa%3Db&lang=fr"
	tests := []struct {
		name    string
		msg     auth.Message
		want    string   // the body that arrives, when not msg.Body
		wantRaw []string // fragments the encoded message must hold
	}{
		{
			name: "short ascii",
			msg:  auth.Message{To: "ada@example.com", Subject: "Hello", Body: "Hi Ada.\n"},
		},
		{
			name: "no final line break",
			msg:  auth.Message{To: "cy@example.com", Subject: "Hi", Body: "one\ntwo"},
			want: "one\ntwo\n",
		},
		{
			name: "long link line",
			msg: auth.Message{
				To:      "bob@example.com",
				Subject: "Reset your XCloak password",
				Body:    "Someone asked to reset your password.\n\n" + link + "\n\nIf it was not you, ignore this mail.\n",
			},
			wantRaw: []string{"Content-Transfer-Encoding: quoted-printable", "=3D", "=\r\n"},
		},
		{
			name: "non-ascii subject and body",
			msg: auth.Message{
				To:      "zoe@example.com",
				Subject: "Réinitialisez votre mot de passe ✓",
				Body:    "Bonjour Zoë,\r\ncliquez ici : " + link + "\r\n",
			},
			wantRaw: []string{"Subject: =?UTF-8?"},
		},
	}
	sink := testenv.SMTP(t)
	mailer, err := smtpmail.New(sink.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := mailer.Send(t.Context(), tt.msg); err != nil {
				t.Fatalf("Send: %v", err)
			}
			addr := tt.msg.To
			got := sink.WaitFor(t, addr)

			if len(got.To) != 1 || got.To[0] != addr {
				t.Errorf("envelope To = %q, want [%q]", got.To, addr)
			}
			if got.From != testenv.SinkFrom {
				t.Errorf("envelope From = %q, want %q", got.From, testenv.SinkFrom)
			}
			if got.Subject != tt.msg.Subject {
				t.Errorf("Subject = %q, want %q", got.Subject, tt.msg.Subject)
			}
			// The sink reports line endings as "\n", whatever was sent.
			want := strings.ReplaceAll(tt.msg.Body, "\r\n", "\n")
			if tt.want != "" {
				want = tt.want
			}
			if got.Body != want {
				t.Errorf("Body = %q, want %q", got.Body, want)
			}
			for _, frag := range tt.wantRaw {
				if !bytes.Contains(got.Raw, []byte(frag)) {
					t.Errorf("raw message lacks %q:\n%s", frag, got.Raw)
				}
			}
			for _, line := range strings.Split(string(got.Raw), "\r\n") {
				if len(line) > 78 {
					t.Errorf("raw line of %d characters, want at most 78: %q", len(line), line)
				}
			}
		})
	}
}

// TestMailerGreetsWithTheSendersDomain: EHLO names the domain of the
// configured sender, not this machine's host name, which would tell every
// server on the way, and every recipient in a Received header, what the
// machine behind the login page is called.
func TestMailerGreetsWithTheSendersDomain(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	sink := testenv.SMTP(t)
	for _, tt := range []struct{ from, want string }{
		{testenv.SinkFrom, "test.invalid"},
		{"XCloak <xcloak@Login.Example.COM>", "Login.Example.COM"},
		{"xcloak@bücher.example", "xn--bcher-kva.example"},
	} {
		mailer, err := smtpmail.New("smtp://" + sink.Addr() + "?tls=none&from=" + url.QueryEscape(tt.from))
		if err != nil {
			t.Fatal(err)
		}
		if err := mailer.Send(t.Context(), auth.Message{To: "ada@example.com", Subject: "s", Body: "b"}); err != nil {
			t.Fatalf("Send: %v", err)
		}
		got := sink.WaitFor(t, "ada@example.com")
		if got.Helo != tt.want {
			t.Errorf("from %q: EHLO %q, want %q", tt.from, got.Helo, tt.want)
		}
		if host != tt.want && strings.Contains(got.Helo, host) {
			t.Errorf("from %q: EHLO %q names this machine, %q", tt.from, got.Helo, host)
		}
	}
}

func TestMailerConcurrentSends(t *testing.T) {
	sink := testenv.SMTP(t)
	mailer, err := smtpmail.New(sink.URL())
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = mailer.Send(t.Context(), auth.Message{
				To: fmt.Sprintf("user%d@example.com", i), Subject: fmt.Sprint("mail ", i), Body: fmt.Sprint("body ", i),
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	for i := range n {
		got := sink.WaitFor(t, fmt.Sprintf("user%d@example.com", i))
		if want := fmt.Sprint("body ", i, "\n"); got.Body != want {
			t.Errorf("user%d Body = %q, want %q", i, got.Body, want)
		}
	}
	if got := len(sink.Messages()); got != n {
		t.Errorf("messages received = %d, want %d", got, n)
	}
}

func TestMailerRefusesHeaderInjection(t *testing.T) {
	sink := testenv.SMTP(t)
	mailer, err := smtpmail.New(sink.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range authtest.InvalidMessages {
		t.Run(tt.Name, func(t *testing.T) {
			err := mailer.Send(t.Context(), tt.Msg)
			if !errors.Is(err, auth.ErrInvalidMessage) {
				t.Errorf("Send error = %v, want ErrInvalidMessage", err)
			}
		})
	}
	if got := sink.Messages(); len(got) != 0 {
		t.Errorf("sink received %d messages, want 0: %+v", len(got), got)
	}
}

func TestMailerFailures(t *testing.T) {
	// A port nothing listens on: taken, then given back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	sink := testenv.SMTP(t)

	tests := []struct {
		name string
		url  string
		ctx  context.Context
		is   error
	}{
		{"server down", "smtp://mailer:s3cret@" + closed + "?from=xcloak@example.com", context.Background(), nil},
		{"no STARTTLS offered", "smtp://mailer:s3cret@" + sink.Addr() + "?from=xcloak@example.com", context.Background(), nil},
		{"context canceled", "smtp://" + sink.Addr() + "?from=xcloak@example.com&tls=opportunistic", canceled, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mailer, err := smtpmail.New(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			err = mailer.Send(tt.ctx, auth.Message{To: "ada@example.com", Subject: "s", Body: "b"})
			if err == nil {
				t.Fatal("Send succeeded, want an error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Send error = %v, want it to wrap %v", err, tt.is)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Send error %q reveals the password", err)
			}
		})
	}
	if got := len(sink.Messages()); got != 0 {
		t.Errorf("sink received %d messages, want 0", got)
	}
}

// The Mailer interface is what callers hold; Mailer must satisfy it.
var _ auth.Mailer = (*smtpmail.Mailer)(nil)
