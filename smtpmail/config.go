package smtpmail

import (
	"errors"
	"fmt"
	"log/slog"
	netmail "net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalidURL is returned by ParseURL and New for a URL they cannot use;
// the wrapping error says what is wrong.
var ErrInvalidURL = errors.New("smtpmail: invalid SMTP URL")

// Security says how the connection to the SMTP server is protected.
type Security int

const (
	// StartTLS upgrades a plain connection with STARTTLS and refuses to
	// send if the server does not offer it. It is the default for smtp://.
	StartTLS Security = iota
	// ImplicitTLS speaks TLS from the first byte (smtps://).
	ImplicitTLS
	// OpportunisticTLS uses STARTTLS when the server offers it and sends
	// in clear otherwise (tls=opportunistic). Whoever is on the path can
	// strip the offer, so it is refused with a user and password.
	OpportunisticTLS
	// NoTLS never encrypts (tls=none); for relays on the same host or
	// network, and tests. It is refused with a user and password, and
	// Config.InClearOverNetwork tells when it crosses a network.
	NoTLS
)

// String returns the name used for s in the tls parameter of an SMTP URL,
// or "implicit" for ImplicitTLS.
func (s Security) String() string {
	switch s {
	case StartTLS:
		return "starttls"
	case ImplicitTLS:
		return "implicit"
	case OpportunisticTLS:
		return "opportunistic"
	case NoTLS:
		return "none"
	}
	return "Security(" + strconv.Itoa(int(s)) + ")"
}

// Config is a parsed SMTP URL. String and LogValue leave the password
// out, so a config can be printed or logged as a whole.
type Config struct {
	// Host is the server's host name or IP address.
	Host string
	// Port is the server's TCP port.
	Port int
	// Username and Password authenticate to the server; both are empty when
	// the server takes mail without authentication.
	Username string
	// Password is the secret paired with Username.
	Password string
	// From is the sender, such as "xcloak@example.com" or
	// "XCloak <xcloak@example.com>".
	From string
	// Security says how the connection is protected.
	Security Security
}

// String describes c without its password.
func (c Config) String() string {
	auth := "no auth"
	if c.Username != "" {
		auth = "user " + c.Username
	}
	return fmt.Sprintf("smtp server %s (%s, %s) from %s",
		hostPort(c.Host, c.Port), c.Security, auth, c.From)
}

// LogValue keeps the password out of structured logs.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("host", c.Host),
		slog.Int("port", c.Port),
		slog.String("user", c.Username),
		slog.String("from", c.From),
		slog.String("tls", c.Security.String()),
	)
}

// InClearOverNetwork reports whether c may send mail, the links in it
// included, in clear to a host other than this machine (one that is not
// localhost or a loopback address): with tls=none, or with
// tls=opportunistic, whose STARTTLS anyone on the path can strip. A host
// name is not resolved.
func (c Config) InClearOverNetwork() bool {
	if c.Security != NoTLS && c.Security != OpportunisticTLS {
		return false
	}
	if strings.EqualFold(c.Host, "localhost") {
		return false
	}
	ip, err := netip.ParseAddr(c.Host)
	return err != nil || !ip.IsLoopback()
}

// hostPort joins host and port, bracketing IPv6 literals.
func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// ParseURL parses the SMTP URL XCloak is configured with:
//
//	smtp://user:pass@host:587?from=xcloak@example.com   STARTTLS, required
//	smtps://user:pass@host:465?from=xcloak@example.com  implicit TLS
//	smtp://host:25?from=xcloak@example.com&tls=none     never encrypted
//
// The tls parameter of smtp:// is starttls (the default), opportunistic or
// none. The port defaults to 587 for smtp:// (25 with tls=none) and 465 for
// smtps://. The from parameter is required. User and password are optional
// but go together, and are refused with tls=none, which would send them in
// clear, and with tls=opportunistic, which would send them in clear to
// whoever strips STARTTLS from the server's answer. Special characters in
// them must be percent-encoded.
//
// Errors wrap ErrInvalidURL, say what is wrong and never contain the
// password.
func ParseURL(rawURL string) (Config, error) {
	cfg, err := parseURL(rawURL)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalidURL, err)
	}
	return cfg, nil
}

// parseURL does the work of ParseURL.
func parseURL(rawURL string) (Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Config{}, errors.New(describeURLError(err))
	}
	return configFromURL(u)
}

// describeURLError says why url.Parse failed without quoting the input: the
// *url.Error carries the whole URL, and its cause quotes the piece it choked
// on, which for a password holding '/' or '?' is part of the password.
func describeURLError(err error) string {
	cause := err
	if ue, ok := errors.AsType[*url.Error](err); ok {
		cause = ue.Err
	}
	msg := quoted.ReplaceAllString(cause.Error(), "")
	msg = strings.TrimPrefix(msg, "net/url: ")
	return "not a valid URL (" + msg + "); " + encodeHint
}

// cutShort reports whether v, a query parameter's value, holds a '?'
// after an '@': the rest of a URL whose password held a '?'.
func cutShort(v string) bool {
	_, after, found := strings.Cut(v, "@")
	return found && strings.Contains(after, "?")
}

// encodeHint says how to write a user or password that cut the URL short.
const encodeHint = "percent-encode '/', '?', '#', '@', ':' and '%' in the user and password"

// quoted matches a Go-quoted string and the space before it.
var quoted = regexp.MustCompile(` ?"(?:[^"\\]|\\.)*"`)

// smtpParams are the query parameters an SMTP URL may carry.
var smtpParams = map[string]bool{"from": true, "tls": true}

func configFromURL(u *url.URL) (Config, error) {
	var cfg Config
	password, _ := u.User.Password()
	// withhold keeps a piece of the URL out of an error if a malformed URL
	// has put the password into it.
	withhold := func(s string) string {
		if password != "" && strings.Contains(s, password) {
			return "(withheld: holds the password)"
		}
		return s
	}
	quote := func(s string) string {
		if w := withhold(s); w != s {
			return w
		}
		return strconv.Quote(s)
	}
	switch u.Scheme {
	case "smtp":
		cfg.Security, cfg.Port = StartTLS, 587
	case "smtps":
		cfg.Security, cfg.Port = ImplicitTLS, 465
	case "":
		return cfg, errors.New("no scheme; want smtp:// or smtps://")
	default:
		return cfg, fmt.Errorf("scheme %s is not supported; want smtp:// or smtps://", quote(u.Scheme))
	}
	if u.Opaque != "" {
		return cfg, errors.New("want smtp://host:port or smtps://host:port, with the two slashes")
	}
	if u.Path != "" && u.Path != "/" {
		return cfg, errors.New("unexpected path after the host; the URL ends with host:port?from=address")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return cfg, errors.New("unexpected #fragment")
	}

	cfg.Host = u.Hostname()
	if cfg.Host == "" {
		return cfg, errors.New("no host")
	}

	// A plus stays a plus: url.ParseQuery reads it as a space, as a form's
	// body writes one, and would make from=xcloak+alerts@example.com an
	// address with a space in it.
	query, err := url.ParseQuery(strings.ReplaceAll(u.RawQuery, "+", "%2B"))
	if err != nil {
		return cfg, errors.New("query parameters are not validly encoded")
	}
	// A '?' in the password, not percent-encoded, ends the host early:
	// the password's tail, "@", the host and the real query are read as
	// the query, and the password is not known to withhold. No name holds
	// an '@' otherwise, nor any value a '?' after one (an address has
	// none in its domain, but from's display name may), and quoting
	// either would quote the password.
	for key, values := range query {
		if strings.Contains(key, "@") || slices.ContainsFunc(values, func(v string) bool {
			if !cutShort(v) {
				return false
			}
			_, err := netmail.ParseAddress(v)
			return key != "from" || err != nil
		}) {
			return cfg, errors.New("the host is followed by an '@': " + encodeHint)
		}
	}
	for key, values := range query {
		if !smtpParams[key] {
			return cfg, fmt.Errorf("unknown parameter %s; known are from and tls", quote(key))
		}
		if len(values) > 1 {
			return cfg, fmt.Errorf("parameter %s given %d times", key, len(values))
		}
	}

	switch tlsMode := query.Get("tls"); {
	case !query.Has("tls"):
	case cfg.Security == ImplicitTLS:
		return cfg, errors.New("tls parameter cannot be used with smtps://, which always uses TLS")
	case tlsMode == "starttls":
		cfg.Security = StartTLS
	case tlsMode == "opportunistic":
		cfg.Security = OpportunisticTLS
	case tlsMode == "none":
		cfg.Security, cfg.Port = NoTLS, 25
	default:
		return cfg, errors.New("tls must be starttls, opportunistic or none")
	}

	if p := u.Port(); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			return cfg, errors.New("port must be a number from 1 to 65535")
		}
		cfg.Port = port
	}

	if u.User != nil {
		cfg.Username, cfg.Password = u.User.Username(), password
		switch {
		case cfg.Username == "" && cfg.Password != "":
			return cfg, errors.New("password given without a user")
		case cfg.Username != "" && cfg.Password == "":
			return cfg, errors.New("user given without a password")
		case cfg.Username != "" && cfg.Security == NoTLS:
			return cfg, errors.New("user and password with tls=none would be sent in clear; use STARTTLS or smtps://")
		// go-mail's authentication only keeps PLAIN and LOGIN off a
		// connection left in clear: CRAM-MD5, NTLM or SCRAM, which a
		// server that stripped STARTTLS may offer alone, would still give
		// it what it needs to guess the password offline.
		case cfg.Username != "" && cfg.Security == OpportunisticTLS:
			return cfg, errors.New("user and password with tls=opportunistic would be sent without TLS to whoever strips STARTTLS " +
				"from the server's answer; use tls=starttls (the default) or smtps://")
		}
	}

	cfg.From = query.Get("from")
	if cfg.From == "" {
		return cfg, errors.New("from parameter is required, e.g. ?from=xcloak@example.com")
	}
	if _, err := netmail.ParseAddress(cfg.From); err != nil {
		return cfg, fmt.Errorf("from is not a single mail address: %s", withhold(err.Error()))
	}
	return cfg, nil
}
