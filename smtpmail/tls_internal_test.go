package smtpmail

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestImplicitTLSSendsWithPlainAuth: over smtps:// the connection is TLS
// from the first byte, verified against the server's name, and a server
// that offers PLAIN alone (as most do) is given the credentials over it.
func TestImplicitTLSSendsWithPlainAuth(t *testing.T) {
	// httptest's certificate, for 127.0.0.1.
	https := httptest.NewTLSServer(nil)
	certs := https.TLS.Certificates
	pool := x509.NewCertPool()
	pool.AddCert(https.Certificate())
	https.Close()

	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: certs})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type session struct {
		auth string
		data string
	}
	got := make(chan session, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var s session
		defer func() { got <- s }()
		r := bufio.NewReader(c)
		say := func(lines ...string) {
			_, _ = c.Write([]byte(strings.Join(lines, "\r\n") + "\r\n"))
		}
		say("220 mail.example ESMTP")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			cmd := strings.ToUpper(strings.TrimSpace(line))
			switch {
			case strings.HasPrefix(cmd, "EHLO"):
				say("250-mail.example", "250 AUTH PLAIN")
			case strings.HasPrefix(cmd, "AUTH PLAIN"):
				s.auth = strings.TrimSpace(line)[len("AUTH PLAIN "):]
				say("235 2.7.0 ok")
			case strings.HasPrefix(cmd, "MAIL"), strings.HasPrefix(cmd, "RCPT"), cmd == "RSET", cmd == "NOOP":
				say("250 ok")
			case cmd == "DATA":
				say("354 go on")
				var b strings.Builder
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == ".\r\n" {
						break
					}
					b.WriteString(l)
				}
				s.data = b.String()
				say("250 queued")
			case cmd == "QUIT":
				say("221 bye")
				return
			default:
				say("502 no")
			}
		}
	}()

	m, err := New("smtps://mailer:s3cret@" + ln.Addr().String() + "?from=xcloak@example.com")
	if err != nil {
		t.Fatal(err)
	}
	m.tls.RootCAs = pool
	if err := m.Send(t.Context(), auth.Message{To: "ada@example.com", Subject: "s", Body: "over TLS"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	s := <-got
	if want := base64.StdEncoding.EncodeToString([]byte("\x00mailer\x00s3cret")); s.auth != want {
		t.Errorf("AUTH PLAIN %q, want %q", s.auth, want)
	}
	if !strings.Contains(s.data, "over TLS") {
		t.Errorf("the message did not arrive: %q", s.data)
	}
}

// TestImplicitTLSVerifiesTheServer: a certificate that the system does not
// trust fails the Send, before any credential is sent.
func TestImplicitTLSVerifiesTheServer(t *testing.T) {
	https := httptest.NewTLSServer(nil)
	defer https.Close()
	addr := strings.TrimPrefix(https.URL, "https://")
	m, err := New("smtps://mailer:s3cret@" + addr + "?from=xcloak@example.com")
	if err != nil {
		t.Fatal(err)
	}
	err = m.Send(t.Context(), auth.Message{To: "ada@example.com", Subject: "s", Body: "b"})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("Send error = %v, want an unknown authority", err)
	}
}
