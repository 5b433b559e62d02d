package testenv

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// SinkFrom is the sender address in the URL a [MailSink] hands out.
const SinkFrom = "xcloak@test.invalid"

// waitForTimeout bounds [MailSink.WaitFor]; mail that has not arrived by
// then is not coming. A loaded machine (a browser, Redis and Postgres on
// a few cores, packages tested side by side) may take seconds over a
// mail sent in the background, so the bound is well past that.
const waitForTimeout = 30 * time.Second

// Mail is one message a [MailSink] received.
type Mail struct {
	// Helo is the name the client greeted the sink with (SMTP EHLO or
	// HELO).
	Helo string
	// From is the envelope sender (SMTP MAIL FROM).
	From string
	// To holds the envelope recipients (SMTP RCPT TO).
	To []string
	// Header holds the message's header fields as they arrived.
	Header mail.Header
	// Subject is the Subject header with RFC 2047 encoded words decoded.
	Subject string
	// Body is the text/plain part with its transfer encoding undone and line
	// endings turned into "\n"; for a multipart message it is the first
	// text/plain part found, depth first.
	Body string
	// Raw is the message exactly as the client sent it.
	Raw []byte
}

// clone returns a copy of m that shares no memory with it.
func (m Mail) clone() Mail {
	m.To = append([]string(nil), m.To...)
	m.Raw = bytes.Clone(m.Raw)
	h := make(mail.Header, len(m.Header))
	for k, v := range m.Header {
		h[k] = append([]string(nil), v...)
	}
	m.Header = h
	return m
}

// MailSink is a real SMTP server on 127.0.0.1 that keeps every message it
// receives, so tests can send mail the way production does and read it back.
// It offers neither TLS nor authentication. A message that cannot be parsed
// is refused with a 554 reply, so a malformed mail fails the send that made
// it rather than a later search of its body.
type MailSink struct {
	addr   string
	server *smtp.Server

	mu       sync.Mutex
	messages []Mail
	taken    []bool        // taken[i] is set once WaitFor has returned messages[i]
	arrived  chan struct{} // closed and replaced whenever a message arrives
}

// SMTP starts a [MailSink] for this test on a free port of 127.0.0.1 and
// stops it when the test ends.
func SMTP(t testing.TB) *MailSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: listening for SMTP on 127.0.0.1: %v", err)
	}
	s := &MailSink{addr: ln.Addr().String(), arrived: make(chan struct{})}

	logs := &testLogger{t: t}
	s.server = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &sinkSession{sink: s, conn: c}, nil
	}))
	s.server.Domain = "localhost"
	s.server.ReadTimeout = waitForTimeout
	s.server.WriteTimeout = waitForTimeout
	s.server.MaxMessageBytes = 10 << 20
	s.server.ErrorLog = logs

	served := make(chan error, 1)
	go func() { served <- s.server.Serve(ln) }()
	t.Cleanup(func() {
		// Close drops open connections too, so a client a test left
		// connected cannot hold the cleanup. It closes only the listeners
		// Serve has registered, and Serve may not have started yet, so the
		// listener is closed here as well.
		if err := s.server.Close(); err != nil {
			t.Errorf("testenv: stopping the SMTP sink: %v", err)
		}
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("testenv: closing the SMTP sink's listener: %v", err)
		}
		if err := <-served; err != nil && !errors.Is(err, smtp.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("testenv: SMTP sink: %v", err)
		}
		logs.stop()
	})
	return s
}

// Addr returns the sink's host:port.
func (s *MailSink) Addr() string { return s.addr }

// URL returns an SMTP URL for the sink in the form smtpmail.New takes:
// plain SMTP, sender [SinkFrom].
func (s *MailSink) URL() string {
	return "smtp://" + s.addr + "?from=" + SinkFrom + "&tls=none"
}

// Messages returns a copy of every message received so far, oldest first.
func (s *MailSink) Messages() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Mail, len(s.messages))
	for i, m := range s.messages {
		out[i] = m.clone()
	}
	return out
}

// WaitFor returns the oldest message addressed to `to` (an envelope
// recipient, compared without regard to case) that no earlier WaitFor
// returned, waiting for it to arrive. Each message is returned once, so
// successive calls see successive mails. It fails the test if none arrives
// within ten seconds or before the test's context ends.
func (s *MailSink) WaitFor(t testing.TB, to string) Mail {
	t.Helper()
	timer := time.NewTimer(waitForTimeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		for i, m := range s.messages {
			if !s.taken[i] && hasRecipient(m, to) {
				s.taken[i] = true
				s.mu.Unlock()
				return m.clone()
			}
		}
		arrived := s.arrived
		s.mu.Unlock()

		select {
		case <-arrived:
		case <-timer.C:
			t.Fatalf("testenv: no mail to %s within %v; received: %s", to, waitForTimeout, s.summary())
		case <-t.Context().Done():
			t.Fatalf("testenv: test ended while waiting for mail to %s; received: %s", to, s.summary())
		}
	}
}

// summary lists who each message so far went to, for failure messages.
func (s *MailSink) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.messages) == 0 {
		return "nothing"
	}
	var parts []string
	for _, m := range s.messages {
		parts = append(parts, fmt.Sprintf("%q to %v", m.Subject, m.To))
	}
	return strings.Join(parts, "; ")
}

func hasRecipient(m Mail, to string) bool {
	for _, rcpt := range m.To {
		if strings.EqualFold(rcpt, to) {
			return true
		}
	}
	return false
}

// add records m and wakes every waiter.
func (s *MailSink) add(m Mail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m)
	s.taken = append(s.taken, false)
	close(s.arrived)
	s.arrived = make(chan struct{})
}

// sinkSession collects one SMTP transaction at a time.
type sinkSession struct {
	sink *MailSink
	conn *smtp.Conn
	from string
	to   []string
}

func (ss *sinkSession) Reset() { ss.from, ss.to = "", nil }

func (ss *sinkSession) Logout() error { return nil }

func (ss *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from
	return nil
}

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *sinkSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m, err := parseMail(raw)
	if err != nil {
		return &smtp.SMTPError{
			Code:         554,
			EnhancedCode: smtp.EnhancedCode{5, 6, 0},
			Message:      "testenv sink cannot parse the message: " + err.Error(),
		}
	}
	m.Helo, m.From, m.To = ss.conn.Hostname(), ss.from, append([]string(nil), ss.to...)
	ss.sink.add(m)
	return nil
}

// parseMail reads the header, subject and text body of raw.
func parseMail(raw []byte) (Mail, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Mail{}, fmt.Errorf("reading header: %w", err)
	}
	var dec mime.WordDecoder
	subject, err := dec.DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return Mail{}, fmt.Errorf("decoding subject: %w", err)
	}
	body, found, err := textPart(msg.Header, msg.Body)
	if err != nil {
		return Mail{}, err
	}
	if !found {
		return Mail{}, errors.New("no text/plain part")
	}
	return Mail{
		Header:  msg.Header,
		Subject: subject,
		Body:    strings.ReplaceAll(body, "\r\n", "\n"),
		Raw:     raw,
	}, nil
}

// partHeader is what textPart reads of a header; mail.Header and the
// textproto.MIMEHeader of a multipart part both provide it.
type partHeader interface{ Get(key string) string }

// textPart returns the decoded text of the first text/plain part of an
// entity with header h and body r, searching multiparts depth first.
func textPart(h partHeader, r io.Reader) (string, bool, error) {
	mediaType, params := "text/plain", map[string]string{}
	if ct := h.Get("Content-Type"); ct != "" {
		var err error
		mediaType, params, err = mime.ParseMediaType(ct)
		if err != nil {
			return "", false, fmt.Errorf("Content-Type %q: %w", ct, err)
		}
	}

	if strings.HasPrefix(mediaType, "multipart/") {
		boundary := params["boundary"]
		if boundary == "" {
			return "", false, fmt.Errorf("%s without a boundary", mediaType)
		}
		// NextRawPart leaves Content-Transfer-Encoding to decode below, so
		// every encoding goes through one path.
		mr := multipart.NewReader(r, boundary)
		for {
			part, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				return "", false, nil
			}
			if err != nil {
				return "", false, fmt.Errorf("reading %s: %w", mediaType, err)
			}
			text, found, err := textPart(part.Header, part)
			if err != nil || found {
				return text, found, err
			}
		}
	}
	if mediaType != "text/plain" {
		return "", false, nil
	}

	decoded, err := undoTransferEncoding(h.Get("Content-Transfer-Encoding"), r)
	if err != nil {
		return "", false, err
	}
	text, err := toUTF8(params["charset"], decoded)
	return text, true, err
}

// undoTransferEncoding reads r, decoding the named Content-Transfer-Encoding.
func undoTransferEncoding(encoding string, r io.Reader) ([]byte, error) {
	switch enc := strings.ToLower(strings.TrimSpace(encoding)); enc {
	case "", "7bit", "8bit", "binary":
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		// The decoder skips the line breaks base64 bodies are wrapped with.
		r = base64.NewDecoder(base64.StdEncoding, r)
	default:
		return nil, fmt.Errorf("unsupported Content-Transfer-Encoding %q", encoding)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("decoding %s body: %w", encoding, err)
	}
	return b, nil
}

// toUTF8 converts text in charset to a string. Mail from XCloak is UTF-8;
// Latin-1 is accepted as well since it is what older clients send.
func toUTF8(charset string, b []byte) (string, error) {
	switch strings.ToLower(charset) {
	case "", "utf-8", "utf8", "us-ascii":
		return string(b), nil
	case "iso-8859-1", "latin1":
		runes := make([]rune, len(b))
		for i, c := range b {
			runes[i] = rune(c)
		}
		return string(runes), nil
	}
	return "", fmt.Errorf("unsupported charset %q", charset)
}

// testLogger passes the SMTP server's error log to the test's log until the
// test is over, when logging through t would panic.
type testLogger struct {
	t       testing.TB
	mu      sync.Mutex
	stopped bool
}

func (l *testLogger) Printf(format string, v ...any) {
	l.log(fmt.Sprintf(format, v...))
}

func (l *testLogger) Println(v ...any) {
	l.log(strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}

func (l *testLogger) log(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Logf("testenv: SMTP sink: %s", msg)
	}
}

func (l *testLogger) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}
