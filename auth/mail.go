package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	netmail "net/mail"
	"strconv"
	"strings"
	"time"
)

// Message is one outgoing plain-text mail.
type Message struct {
	// To is the single recipient's address, such as "ada@example.com",
	// which mail must read as itself: no display name or comment, so that
	// the mail goes to the account the address names.
	To string
	// Subject is the subject line; it may hold any UTF-8 text but no line breaks.
	Subject string
	// Body is the plain-text body.
	Body string
}

// Mailer sends mail. Implementations must be safe for concurrent use.
//
// The Service validates every message before a Mailer sees it, so a Mailer
// cannot be the one that lets a header through. A Mailer that can also be
// used on its own should still refuse what Validate refuses, as both of
// XCloak's do.
type Mailer interface {
	// Send delivers m or returns why it could not. A message that fails
	// validation is refused with an error wrapping ErrInvalidMessage.
	Send(ctx context.Context, m Message) error
}

var (
	// ErrInvalidMessage is returned for a Message that must not be sent: a
	// recipient that is not exactly one address read as itself, or a line
	// break in a header.
	ErrInvalidMessage = errors.New("auth: invalid mail message")
)

// Validate refuses what could smuggle extra headers or recipients into a
// mail. go-mail encodes header values, but refusing here keeps the rule the
// same for every Mailer and makes the failure explicit.
func (m Message) Validate() error {
	if strings.ContainsAny(m.To, "\r\n") {
		return fmt.Errorf("%w: recipient contains a line break", ErrInvalidMessage)
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return fmt.Errorf("%w: subject contains a line break", ErrInvalidMessage)
	}
	if strings.TrimSpace(m.To) == "" {
		return fmt.Errorf("%w: no recipient", ErrInvalidMessage)
	}
	// ParseAddress accepts exactly one address; a list is an error.
	if _, err := netmail.ParseAddress(m.To); err != nil {
		return fmt.Errorf("%w: recipient is not a single mail address: %v", ErrInvalidMessage, err)
	}
	if !mailedAsItself(m.To) {
		return fmt.Errorf("%w: recipient is read as another address", ErrInvalidMessage)
	}
	return nil
}

// mailedAsItself reports whether a mail to email goes to email: one
// address, without a display name or comment, that mail reads as the
// string itself. An email field takes "ann<eve@evil.test>", one string
// without spaces, but its mail goes to eve@evil.test; an account under it
// would have every link of its own mailed there.
func mailedAsItself(email string) bool {
	a, err := netmail.ParseAddress(email)
	return err == nil && a.Name == "" && a.Address == email
}

// checkedMailer validates each message before the Mailer it wraps sees it.
// The Service holds its Mailer only through one, so whatever Mailer it is
// given, a message with an injected header or a second recipient is refused
// here.
type checkedMailer struct{ next Mailer }

// Send refuses msg if Validate does, and hands it on otherwise.
func (m checkedMailer) Send(ctx context.Context, msg Message) error {
	if err := msg.Validate(); err != nil {
		return err
	}
	return m.next.Send(ctx, msg)
}

// LogMailer writes each message to a logger instead of sending it. It exists
// so a server without SMTP configured still lets a developer on the same
// machine follow a reset link; the body, and so the link's token, is written
// to the log, so it must not be used where logs are shared.
type LogMailer struct {
	// Logger receives one WARN record per message; nil means slog.Default().
	Logger *slog.Logger
}

// Send logs msg at WARN after the same checks an SMTPMailer makes.
func (m LogMailer) Send(ctx context.Context, msg Message) error {
	if err := msg.Validate(); err != nil {
		return err
	}
	logger := m.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.WarnContext(ctx, "mail is not configured: logging the message instead of sending it",
		slog.String("to", msg.To),
		slog.String("subject", msg.Subject),
		slog.String("body", msg.Body))
	return nil
}

// linkMade is when a link mailed now is made: its life (LinkLife) counts
// from here, not from the request. A mail that waited for a busy domain
// still says the whole life, and its link keeps it.
func (s *Service) linkMade() time.Time {
	return s.now()
}

// LinkLife is how long a mailed link works, as its mail and the page that
// sent it say it: whole hours when it is some, else whole minutes (rounded
// down, so that neither promises more than the link keeps).
func LinkLife(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute:
		return plural(int(d/time.Minute), "minute")
	default:
		return plural(max(int(d/time.Second), 1), "second")
	}
}

// plural joins n and unit, adding an "s" unless n is one.
func plural(n int, unit string) string {
	s := strconv.Itoa(n) + " " + unit
	if n != 1 {
		s += "s"
	}
	return s
}
