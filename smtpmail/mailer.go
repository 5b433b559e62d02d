package smtpmail

import (
	"context"
	"crypto/rand"
	"fmt"
	netmail "net/mail"
	"strings"
	"time"
	"unicode/utf8"

	gomail "github.com/wneessen/go-mail"
	"golang.org/x/net/idna"

	"github.com/xcloak/xcloak/auth"
)

// sendTimeout bounds each stage of one Send, so a stalled server cannot
// hold a request open. go-mail sets it as the connection's deadline three
// times: at the dial (for the greeting), after the greeting (for EHLO,
// STARTTLS and AUTH) and before the message (for MAIL to QUIT); the
// context bounds the dial alone. A server that answers each stage just in
// time holds a Send for up to three times this.
const sendTimeout = 10 * time.Second

// Mailer sends mail through an SMTP server. It opens a connection per
// message, which suits the low volume of password reset mail and needs no
// pool to keep healthy. It is safe for concurrent use.
type Mailer struct {
	cfg    Config
	client *gomail.Client
}

// New returns a mailer for the server rawURL names; see ParseURL for its
// forms. It does not connect: a server that is down is reported by Send.
func New(rawURL string) (*Mailer, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	opts := []gomail.Option{
		gomail.WithPort(cfg.Port),
		gomail.WithTimeout(sendTimeout),
		// go-mail would greet with this machine's host name, which every
		// server on the way and every Received header would learn.
		gomail.WithHELO(senderDomain(cfg.From)),
	}
	switch cfg.Security {
	case StartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case ImplicitTLS:
		opts = append(opts, gomail.WithSSL())
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
	return &Mailer{cfg: cfg, client: client}, nil
}

// Config returns the configuration m was made from.
func (m *Mailer) Config() Config { return m.cfg }

// Send delivers msg, giving up after ten seconds or when ctx ends. A body
// that does not end with a line break is given one, as SMTP would anyway.
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
	if err := m.client.DialAndSendWithContext(ctx, out); err != nil {
		return fmt.Errorf("smtpmail: sending mail through %s: %w", hostPort(m.cfg.Host, m.cfg.Port), err)
	}
	return nil
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
