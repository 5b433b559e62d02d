package smtpmail_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/smtpmail"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		name string
		url  string
		want smtpmail.Config
	}{
		{"starttls by default", "smtp://mailer:s3cret@mail.example.com:587?from=xcloak@example.com",
			smtpmail.Config{Host: "mail.example.com", Port: 587, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: smtpmail.StartTLS}},
		{"smtp default port", "smtp://mailer:s3cret@mail.example.com?from=xcloak@example.com",
			smtpmail.Config{Host: "mail.example.com", Port: 587, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: smtpmail.StartTLS}},
		{"explicit starttls", "smtp://mail.example.com:2525?from=xcloak@example.com&tls=starttls",
			smtpmail.Config{Host: "mail.example.com", Port: 2525, From: "xcloak@example.com", Security: smtpmail.StartTLS}},
		{"implicit tls", "smtps://mailer:s3cret@mail.example.com:465?from=xcloak@example.com",
			smtpmail.Config{Host: "mail.example.com", Port: 465, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: smtpmail.ImplicitTLS}},
		{"smtps default port", "smtps://mail.example.com?from=xcloak@example.com",
			smtpmail.Config{Host: "mail.example.com", Port: 465, From: "xcloak@example.com", Security: smtpmail.ImplicitTLS}},
		{"plain", "smtp://127.0.0.1:25?from=xcloak@example.com&tls=none",
			smtpmail.Config{Host: "127.0.0.1", Port: 25, From: "xcloak@example.com", Security: smtpmail.NoTLS}},
		{"plain default port", "smtp://relay?from=xcloak@example.com&tls=none",
			smtpmail.Config{Host: "relay", Port: 25, From: "xcloak@example.com", Security: smtpmail.NoTLS}},
		{"opportunistic", "smtp://relay:587?tls=opportunistic&from=xcloak@example.com",
			smtpmail.Config{Host: "relay", Port: 587, From: "xcloak@example.com", Security: smtpmail.OpportunisticTLS}},
		// A plus is the address' own, as in any URL but a form's body:
		// xcloak+alerts@, not "xcloak alerts@".
		{"plus in from", "smtp://relay:587?from=xcloak+alerts@example.com",
			smtpmail.Config{Host: "relay", Port: 587, From: "xcloak+alerts@example.com", Security: smtpmail.StartTLS}},
		{"question mark after an at in the display name", "smtp://relay:587?from=%22Ops%20@%20Example?%22%20%3Cxcloak@example.com%3E",
			smtpmail.Config{Host: "relay", Port: 587, From: `"Ops @ Example?" <xcloak@example.com>`, Security: smtpmail.StartTLS}},
		{"escaped password and display name", "smtp://mailer%40example.com:p%2Fa%3Fs%23s%40@[::1]:587/?from=XCloak%20%3Cxcloak@example.com%3E",
			smtpmail.Config{Host: "::1", Port: 587, Username: "mailer@example.com", Password: "p/a?s#s@", From: "XCloak <xcloak@example.com>", Security: smtpmail.StartTLS}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			got, err := smtpmail.ParseURL(tt.url)
			if err != nil {
				t.Fatalf("ParseURL: %v", err)
			}
			if got != tt.want {
				t.Errorf("ParseURL = %#v, want %#v", got, tt.want)
			}
			if _, err := smtpmail.New(tt.url); err != nil {
				t.Errorf("New: %v", err)
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
		// Whoever is on the path can strip STARTTLS from the server's
		// answer, and the credentials would go without it.
		{"credentials with opportunistic TLS", "smtp://mailer:s3cret@mail.example.com?from=xcloak@example.com&tls=opportunistic",
			"user and password with tls=opportunistic would be sent without TLS to whoever strips STARTTLS"},
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
		// An unescaped '?' ends the host early too, so the password's
		// tail, the host with it, is taken for the query.
		{"question mark opens the password", "smtp://mailer:?s3cret@mail.example.com:587?from=xcloak@example.com", "percent-encode"},
		{"digits then question mark in password", "smtp://mailer:123?s3cret@mail.example.com?from=xcloak@example.com", "percent-encode"},
		{"question mark then a parameter in password", "smtp://mailer:123?x=s3cret@mail.example.com?from=xcloak@example.com", "percent-encode"},
		{"question mark then parameters in password", "smtp://mailer:123?a=1&s3cret@mail.example.com?from=xcloak@example.com", "percent-encode"},
		{"at and question mark in password", "smtp://mailer:p@ss?s3cret@mail.example.com?from=xcloak@example.com", "percent-encode"},
		{"password put in a parameter name", "smtp://mailer:s3cret@mail.example.com?s3cret=1&from=xcloak@example.com", "unknown parameter (withheld"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := smtpmail.ParseURL(tt.url)
			if !errors.Is(err, smtpmail.ErrInvalidURL) {
				t.Fatalf("ParseURL error = %v, want ErrInvalidURL", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseURL error = %q, want it to say %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ParseURL error %q reveals the password", err)
			}
			if _, err := smtpmail.New(tt.url); !errors.Is(err, smtpmail.ErrInvalidURL) {
				t.Errorf("New error = %v, want ErrInvalidURL", err)
			}
		})
	}
}

func TestConfigKeepsPasswordOutOfLogs(t *testing.T) {
	cfg, err := smtpmail.ParseURL("smtps://mailer:s3cret@mail.example.com?from=xcloak@example.com")
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

// TestInClearOverNetwork: tls=none (or tls=opportunistic, which anyone on
// the path can make none) to a host that is not this machine sends every
// mail, reset links included, in clear across a network;
// Config says so for the start-up's warning.
func TestInClearOverNetwork(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want bool
	}{
		{"smtp://mail.example.com:25?from=xcloak@example.com&tls=none", true},
		{"smtp://relay?from=xcloak@example.com&tls=none", true},
		{"smtp://10.0.0.25?from=xcloak@example.com&tls=none", true},
		{"smtp://[2001:db8::25]?from=xcloak@example.com&tls=none", true},
		// A name is not resolved: only these are this machine.
		{"smtp://127.0.0.1:25?from=xcloak@example.com&tls=none", false},
		{"smtp://127.0.0.53:25?from=xcloak@example.com&tls=none", false},
		{"smtp://[::1]:25?from=xcloak@example.com&tls=none", false},
		{"smtp://localhost:25?from=xcloak@example.com&tls=none", false},
		{"smtp://LocalHost:25?from=xcloak@example.com&tls=none", false},
		// STARTTLS if offered: whoever on the path strips the offer
		// reads the mail.
		{"smtp://mail.example.com?from=xcloak@example.com&tls=opportunistic", true},
		{"smtp://127.0.0.1?from=xcloak@example.com&tls=opportunistic", false},
		{"smtp://mail.example.com?from=xcloak@example.com", false},
		{"smtps://mail.example.com?from=xcloak@example.com", false},
	} {
		cfg, err := smtpmail.ParseURL(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.InClearOverNetwork(); got != tt.want {
			t.Errorf("ParseURL(%q).InClearOverNetwork() = %v, want %v", tt.url, got, tt.want)
		}
	}
}
