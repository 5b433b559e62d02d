package smtpmail

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"strings"
	"time"
	"unicode/utf8"

	gomail "github.com/wneessen/go-mail"
	"golang.org/x/net/idna"

	"github.com/xcloak/xcloak/auth"
)

// sendTimeout bounds one Send, so a stalled server cannot hold a request
// open. go-mail sets it as the connection's deadline at each of three
// stages (the greeting; EHLO, STARTTLS and AUTH; MAIL to QUIT), and its
// context bounds the dial alone; the connection is closed when the Send's
// context ends (dial), so that a server answering each stage just in time
// cannot hold a Send for three times this, nor one that stalls past a
// shorter context of the caller's.
const sendTimeout = 10 * time.Second

// Mailer sends mail through an SMTP server. It opens a connection per
// message, which suits the low volume of password reset mail and needs no
// pool to keep healthy. It is safe for concurrent use.
type Mailer struct {
	cfg    Config
	client *gomail.Client
	// tls is the TLS configuration of STARTTLS and implicit TLS alike.
	tls *tls.Config
}

// New returns a mailer for the server rawURL names; see ParseURL for its
// forms. It does not connect: a server that is down is reported by Send.
func New(rawURL string) (*Mailer, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	m := &Mailer{cfg: cfg, tls: &tls.Config{ServerName: cfg.Host, MinVersion: tls.VersionTLS12}}
	opts := []gomail.Option{
		gomail.WithPort(cfg.Port),
		gomail.WithTimeout(sendTimeout),
		// go-mail would greet with this machine's host name, which every
		// server on the way and every Received header would learn.
		gomail.WithHELO(senderDomain(cfg.From)),
		gomail.WithDialContextFunc(m.dial),
		gomail.WithTLSConfig(m.tls),
	}
	switch cfg.Security {
	case StartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case ImplicitTLS:
		// dial speaks TLS from the first byte. go-mail's WithSSL would
		// take a connection it did not dial for one in clear, and allow no
		// PLAIN or LOGIN over it; with this policy it reads the TLS state
		// of the connection as it is (and, there being no STARTTLS over
		// TLS, sends none).
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	case OpportunisticTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	case NoTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if cfg.Username != "" {
		// ParseURL takes credentials only with STARTTLS required or
		// implicit TLS, so they never leave on a connection in clear.
		// Auto-discovery picks the strongest mechanism the server offers.
		opts = append(opts,
			gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(cfg.Username),
			gomail.WithPassword(cfg.Password))
	}
	// Each DialAndSendWithContext call uses its own connection and the
	// client's settings are only read, so one client serves all senders.
	client, err := gomail.NewClient(cfg.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("smtpmail: setting up the SMTP client for %s: %w", hostPort(cfg.Host, cfg.Port), err)
	}
	m.client = client
	return m, nil
}

// sendKey is the context key under which Send hands its context to dial.
type sendKey struct{}

// dial connects to the server for one Send, in TLS for implicit TLS. The
// context go-mail gives it ends with the dial; the connection is closed
// when the Send's own context ends, which go-mail does not watch once
// connected. What it reads is bounded by maxSessionRead.
func (m *Mailer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if send, ok := ctx.Value(sendKey{}).(context.Context); ok {
		context.AfterFunc(send, func() { raw.Close() })
	}
	conn := &boundedConn{Conn: raw, left: maxSessionRead}
	if m.cfg.Security != ImplicitTLS {
		return conn, nil
	}
	tc := tls.Client(conn, m.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// Config returns the configuration m was made from.
func (m *Mailer) Config() Config { return m.cfg }

// Send delivers msg, giving up after ten seconds or when ctx ends. A body
// that does not end with a line break is given one, as SMTP would anyway.
// A message the server took is sent, whatever befalls the session after.
func (m *Mailer) Send(ctx context.Context, msg auth.Message) error {
	if err := msg.Validate(); err != nil {
		return err
	}
	if !strings.HasSuffix(msg.Body, "\n") {
		msg.Body += "\n"
	}
	out := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := out.From(m.cfg.From); err != nil {
		return fmt.Errorf("smtpmail: sender: %w", err)
	}
	if err := out.To(msg.To); err != nil {
		return fmt.Errorf("%w: %v", auth.ErrInvalidMessage, err)
	}
	out.Subject(msg.Subject)
	out.SetDate()
	out.SetMessageIDWithValue(messageID(m.cfg.From))
	out.SetBodyString(gomail.TypeTextPlain, msg.Body)

	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if err := m.client.DialAndSendWithContext(context.WithValue(ctx, sendKey{}, ctx), out); err != nil {
		if out.IsDelivered() {
			// The server took the message (its 250 after the data): what
			// failed is the RSET or QUIT that only ends the session. The
			// mail is on its way; a failure here would have the caller
			// count as not sent a link its owner receives.
			return nil
		}
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			// The connection was closed under the session: say why.
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return fmt.Errorf("smtpmail: sending mail through %s: %w", hostPort(m.cfg.Host, m.cfg.Port), err)
	}
	return nil
}

// maxSessionRead bounds what one Send reads from the server, its TLS
// handshake included: a session of one message reads a few kilobytes.
// net/textproto reads a reply line, and a reply of many lines, to its end
// however long, so a server (or, before STARTTLS, whoever is on the path)
// that never ends one would otherwise be read into memory until the
// stage's deadline.
const maxSessionRead = 1 << 20

// errTooMuchRead: the server sent more than maxSessionRead.
var errTooMuchRead = errors.New("smtpmail: the server sent more than 1 MiB in one session")

// boundedConn is a connection that reads at most left bytes more.
type boundedConn struct {
	net.Conn
	left int64
}

func (c *boundedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errTooMuchRead
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}

// messageID makes a Message-ID in the sender's domain rather than go-mail's
// default, which would publish this machine's host name.
func messageID(from string) string {
	return rand.Text() + "@" + senderDomain(from)
}

// senderDomain is the domain of the sender address from, in ASCII (an
// internationalised one as its A-labels), which EHLO and Message-IDs
// name instead of this machine's host name; "xcloak.invalid" if it has
// none to give.
func senderDomain(from string) string {
	const none = "xcloak.invalid"
	a, err := netmail.ParseAddress(from)
	if err != nil {
		return none
	}
	i := strings.LastIndexByte(a.Address, '@')
	if i < 0 || i+1 == len(a.Address) {
		return none
	}
	domain := a.Address[i+1:]
	if strings.ContainsFunc(domain, func(r rune) bool { return r >= utf8.RuneSelf }) {
		if domain, err = idna.Lookup.ToASCII(domain); err != nil {
			return none
		}
	}
	return domain
}
