package auth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
)

func TestSMTPMailerDelivers(t *testing.T) {
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
			name: "non-ascii subject and body, display name",
			msg: auth.Message{
				To:      "Zoë Durand <zoe@example.com>",
				Subject: "Réinitialisez votre mot de passe ✓",
				Body:    "Bonjour Zoë,\r\ncliquez ici : " + link + "\r\n",
			},
			wantRaw: []string{"Subject: =?UTF-8?"},
		},
	}
	sink := testenv.SMTP(t)
	mailer, err := auth.NewSMTPMailer(sink.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := mailer.Send(t.Context(), tt.msg); err != nil {
				t.Fatalf("Send: %v", err)
			}
			addr := tt.msg.To
			if i := strings.IndexByte(addr, '<'); i >= 0 {
				addr = strings.Trim(addr[i:], "<>")
			}
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

func TestSMTPMailerConcurrentSends(t *testing.T) {
	sink := testenv.SMTP(t)
	mailer, err := auth.NewSMTPMailer(sink.URL())
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

// invalidMessages are refused by every Mailer before anything is sent.
var invalidMessages = []struct {
	name string
	msg  auth.Message
}{
	{"CRLF in To adds a Bcc", auth.Message{To: "ada@example.com\r\nBcc: eve@example.com", Subject: "s", Body: "b"}},
	{"LF in To", auth.Message{To: "ada@example.com\nBcc: eve@example.com", Subject: "s", Body: "b"}},
	{"CR in Subject", auth.Message{To: "ada@example.com", Subject: "s\rBcc: eve@example.com", Body: "b"}},
	{"LF in Subject", auth.Message{To: "ada@example.com", Subject: "s\nBcc: eve@example.com", Body: "b"}},
	{"two recipients", auth.Message{To: "ada@example.com, eve@example.com", Subject: "s", Body: "b"}},
	{"group", auth.Message{To: "friends: ada@example.com, eve@example.com;", Subject: "s", Body: "b"}},
	{"not an address", auth.Message{To: "ada", Subject: "s", Body: "b"}},
	{"empty To", auth.Message{To: " ", Subject: "s", Body: "b"}},
}

func TestSMTPMailerRefusesHeaderInjection(t *testing.T) {
	sink := testenv.SMTP(t)
	mailer, err := auth.NewSMTPMailer(sink.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range invalidMessages {
		t.Run(tt.name, func(t *testing.T) {
			err := mailer.Send(t.Context(), tt.msg)
			if !errors.Is(err, auth.ErrInvalidMessage) {
				t.Errorf("Send error = %v, want ErrInvalidMessage", err)
			}
		})
	}
	if got := sink.Messages(); len(got) != 0 {
		t.Errorf("sink received %d messages, want 0: %+v", len(got), got)
	}
}

func TestSMTPMailerFailures(t *testing.T) {
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
		{"context canceled", "smtp://mailer:s3cret@" + sink.Addr() + "?from=xcloak@example.com&tls=opportunistic", canceled, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mailer, err := auth.NewSMTPMailer(tt.url)
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

func TestParseSMTPURL(t *testing.T) {
	good := []struct {
		name string
		url  string
		want auth.SMTPConfig
	}{
		{"starttls by default", "smtp://mailer:s3cret@mail.example.com:587?from=xcloak@example.com",
			auth.SMTPConfig{Host: "mail.example.com", Port: 587, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: auth.SMTPStartTLS}},
		{"smtp default port", "smtp://mailer:s3cret@mail.example.com?from=xcloak@example.com",
			auth.SMTPConfig{Host: "mail.example.com", Port: 587, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: auth.SMTPStartTLS}},
		{"explicit starttls", "smtp://mail.example.com:2525?from=xcloak@example.com&tls=starttls",
			auth.SMTPConfig{Host: "mail.example.com", Port: 2525, From: "xcloak@example.com", Security: auth.SMTPStartTLS}},
		{"implicit tls", "smtps://mailer:s3cret@mail.example.com:465?from=xcloak@example.com",
			auth.SMTPConfig{Host: "mail.example.com", Port: 465, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: auth.SMTPImplicitTLS}},
		{"smtps default port", "smtps://mail.example.com?from=xcloak@example.com",
			auth.SMTPConfig{Host: "mail.example.com", Port: 465, From: "xcloak@example.com", Security: auth.SMTPImplicitTLS}},
		{"plain", "smtp://127.0.0.1:25?from=xcloak@example.com&tls=none",
			auth.SMTPConfig{Host: "127.0.0.1", Port: 25, From: "xcloak@example.com", Security: auth.SMTPNoTLS}},
		{"plain default port", "smtp://relay?from=xcloak@example.com&tls=none",
			auth.SMTPConfig{Host: "relay", Port: 25, From: "xcloak@example.com", Security: auth.SMTPNoTLS}},
		{"opportunistic", "smtp://mailer:s3cret@relay:587?tls=opportunistic&from=xcloak@example.com",
			auth.SMTPConfig{Host: "relay", Port: 587, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: auth.SMTPOpportunisticTLS}},
		{"escaped password and display name", "smtp://mailer%40example.com:p%2Fa%3Fs%23s%40@[::1]:587/?from=XCloak%20%3Cxcloak@example.com%3E",
			auth.SMTPConfig{Host: "::1", Port: 587, Username: "mailer@example.com", Password: "p/a?s#s@", From: "XCloak <xcloak@example.com>", Security: auth.SMTPStartTLS}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			got, err := auth.ParseSMTPURL(tt.url)
			if err != nil {
				t.Fatalf("ParseSMTPURL: %v", err)
			}
			if got != tt.want {
				t.Errorf("ParseSMTPURL = %#v, want %#v", got, tt.want)
			}
			if _, err := auth.NewSMTPMailer(tt.url); err != nil {
				t.Errorf("NewSMTPMailer: %v", err)
			}
		})
	}

	bad := []struct {
		name, url, wantErr string
	}{
		{"missing from", "smtp://mailer:s3cret@mail.example.com:587", "from parameter is required"},
		{"empty from", "smtp://mailer:s3cret@mail.example.com:587?from=", "from parameter is required"},
		{"from not an address", "smtp://mailer:s3cret@mail.example.com?from=xcloak", "from is not a single mail address"},
		{"two froms", "smtp://mailer:s3cret@mail.example.com?from=a@example.com,b@example.com", "from is not a single mail address"},
		{"from given twice", "smtp://mailer:s3cret@mail.example.com?from=a@example.com&from=b@example.com", "from given 2 times"},
		{"bad scheme", "http://mailer:s3cret@mail.example.com?from=xcloak@example.com", `scheme "http" is not supported`},
		{"no scheme", "//mail.example.com:587?from=xcloak@example.com", "no scheme"},
		{"host and port only", "mail.example.com:587?from=xcloak@example.com", "is not supported"},
		{"one slash", "smtp:/mail.example.com:587?from=xcloak@example.com", "unexpected path"},
		{"no slashes", "smtp:mail.example.com:587?from=xcloak@example.com", "want smtp://host:port"},
		{"bad tls value", "smtp://mailer:s3cret@mail.example.com?from=xcloak@example.com&tls=yes", "tls must be starttls, opportunistic or none"},
		{"tls with smtps", "smtps://mailer:s3cret@mail.example.com?from=xcloak@example.com&tls=none", "cannot be used with smtps"},
		{"credentials in clear", "smtp://mailer:s3cret@mail.example.com?from=xcloak@example.com&tls=none", "would be sent in clear"},
		{"user without password", "smtp://mailer@mail.example.com?from=xcloak@example.com", "user given without a password"},
		{"password without user", "smtp://:s3cret@mail.example.com?from=xcloak@example.com", "password given without a user"},
		{"unknown parameter", "smtp://mailer:s3cret@mail.example.com?form=xcloak@example.com", `unknown parameter "form"`},
		{"no host", "smtp://mailer:s3cret@:587?from=xcloak@example.com", "no host"},
		{"port zero", "smtp://mailer:s3cret@mail.example.com:0?from=xcloak@example.com", "port must be a number from 1 to 65535"},
		{"port too big", "smtp://mailer:s3cret@mail.example.com:70000?from=xcloak@example.com", "port must be a number from 1 to 65535"},
		{"path", "smtp://mailer:s3cret@mail.example.com/x?from=xcloak@example.com", "unexpected path"},
		{"fragment", "smtp://mailer:s3cret@mail.example.com?from=xcloak@example.com#x", "unexpected #fragment"},
		{"bad query escape", "smtp://mailer:s3cret@mail.example.com?from=%zz", "not validly encoded"},
		// An unescaped '/' ends the host early, so the password's tail is
		// taken for a port or a path.
		{"slash in password", "smtp://mailer:s3cret/x@mail.example.com?from=xcloak@example.com", "not a valid URL"},
		{"digits then slash in password", "smtp://mailer:123/s3cret@mail.example.com?from=xcloak@example.com", "unexpected path"},
		{"bad escape in password", "smtp://mailer:s3cret%zz@mail.example.com?from=xcloak@example.com", "not a valid URL"},
		{"password put in a parameter name", "smtp://mailer:s3cret@mail.example.com?s3cret=1&from=xcloak@example.com", "unknown parameter (withheld"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := auth.ParseSMTPURL(tt.url)
			if !errors.Is(err, auth.ErrInvalidSMTPURL) {
				t.Fatalf("ParseSMTPURL error = %v, want ErrInvalidSMTPURL", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSMTPURL error = %q, want it to say %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ParseSMTPURL error %q reveals the password", err)
			}
			if _, err := auth.NewSMTPMailer(tt.url); !errors.Is(err, auth.ErrInvalidSMTPURL) {
				t.Errorf("NewSMTPMailer error = %v, want ErrInvalidSMTPURL", err)
			}
		})
	}
}

func TestSMTPConfigKeepsPasswordOutOfLogs(t *testing.T) {
	cfg, err := auth.ParseSMTPURL("smtps://mailer:s3cret@mail.example.com?from=xcloak@example.com")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	logger.Info("mail", "smtp", cfg)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("mail", "smtp", cfg)
	fmt.Fprintf(&buf, "%v %+v %s\n", cfg, cfg, cfg)
	out := buf.String()
	if strings.Contains(out, "s3cret") {
		t.Errorf("output reveals the password:\n%s", out)
	}
	if !strings.Contains(out, "mail.example.com") {
		t.Errorf("output lacks the host:\n%s", out)
	}
}

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

	for _, tt := range invalidMessages {
		t.Run(tt.name, func(t *testing.T) {
			buf.Reset()
			if err := mailer.Send(t.Context(), tt.msg); !errors.Is(err, auth.ErrInvalidMessage) {
				t.Errorf("Send error = %v, want ErrInvalidMessage", err)
			}
			if buf.Len() != 0 {
				t.Errorf("refused message was logged: %s", buf.String())
			}
		})
	}
}

// The Mailer interface is what callers hold; both kinds must satisfy it.
var (
	_ auth.Mailer = (*auth.SMTPMailer)(nil)
	_ auth.Mailer = auth.LogMailer{}
)
