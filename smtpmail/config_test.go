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

func TestParseSMTPURL(t *testing.T) {
	good := []struct {
		name string
		url  string
		want smtpmail.SMTPConfig
	}{
		{"starttls by default", "smtp://mailer:s3cret@mail.example.com:587?from=xcloak@example.com",
			smtpmail.SMTPConfig{Host: "mail.example.com", Port: 587, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: smtpmail.SMTPStartTLS}},
		{"smtp default port", "smtp://mailer:s3cret@mail.example.com?from=xcloak@example.com",
			smtpmail.SMTPConfig{Host: "mail.example.com", Port: 587, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: smtpmail.SMTPStartTLS}},
		{"explicit starttls", "smtp://mail.example.com:2525?from=xcloak@example.com&tls=starttls",
			smtpmail.SMTPConfig{Host: "mail.example.com", Port: 2525, From: "xcloak@example.com", Security: smtpmail.SMTPStartTLS}},
		{"implicit tls", "smtps://mailer:s3cret@mail.example.com:465?from=xcloak@example.com",
			smtpmail.SMTPConfig{Host: "mail.example.com", Port: 465, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: smtpmail.SMTPImplicitTLS}},
		{"smtps default port", "smtps://mail.example.com?from=xcloak@example.com",
			smtpmail.SMTPConfig{Host: "mail.example.com", Port: 465, From: "xcloak@example.com", Security: smtpmail.SMTPImplicitTLS}},
		{"plain", "smtp://127.0.0.1:25?from=xcloak@example.com&tls=none",
			smtpmail.SMTPConfig{Host: "127.0.0.1", Port: 25, From: "xcloak@example.com", Security: smtpmail.SMTPNoTLS}},
		{"plain default port", "smtp://relay?from=xcloak@example.com&tls=none",
			smtpmail.SMTPConfig{Host: "relay", Port: 25, From: "xcloak@example.com", Security: smtpmail.SMTPNoTLS}},
		{"opportunistic", "smtp://mailer:s3cret@relay:587?tls=opportunistic&from=xcloak@example.com",
			smtpmail.SMTPConfig{Host: "relay", Port: 587, Username: "mailer", Password: "s3cret", From: "xcloak@example.com", Security: smtpmail.SMTPOpportunisticTLS}},
		{"escaped password and display name", "smtp://mailer%40example.com:p%2Fa%3Fs%23s%40@[::1]:587/?from=XCloak%20%3Cxcloak@example.com%3E",
			smtpmail.SMTPConfig{Host: "::1", Port: 587, Username: "mailer@example.com", Password: "p/a?s#s@", From: "XCloak <xcloak@example.com>", Security: smtpmail.SMTPStartTLS}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			got, err := smtpmail.ParseSMTPURL(tt.url)
			if err != nil {
				t.Fatalf("ParseSMTPURL: %v", err)
			}
			if got != tt.want {
				t.Errorf("ParseSMTPURL = %#v, want %#v", got, tt.want)
			}
			if _, err := smtpmail.NewSMTPMailer(tt.url); err != nil {
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
			_, err := smtpmail.ParseSMTPURL(tt.url)
			if !errors.Is(err, smtpmail.ErrInvalidSMTPURL) {
				t.Fatalf("ParseSMTPURL error = %v, want ErrInvalidSMTPURL", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSMTPURL error = %q, want it to say %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ParseSMTPURL error %q reveals the password", err)
			}
			if _, err := smtpmail.NewSMTPMailer(tt.url); !errors.Is(err, smtpmail.ErrInvalidSMTPURL) {
				t.Errorf("NewSMTPMailer error = %v, want ErrInvalidSMTPURL", err)
			}
		})
	}
}

func TestSMTPConfigKeepsPasswordOutOfLogs(t *testing.T) {
	cfg, err := smtpmail.ParseSMTPURL("smtps://mailer:s3cret@mail.example.com?from=xcloak@example.com")
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
