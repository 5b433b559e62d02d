package testenv_test

import (
	"net/smtp"
	"slices"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
)

// crlf turns a message written with "\n" into the "\r\n" SMTP requires.
func crlf(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }

func TestSMTPSinkParsesMessages(t *testing.T) {
	const link = "https://xcloak.test/reset?token=abc%3D%3D&next=/home"
	tests := []struct {
		name        string
		raw         string
		wantSubject string
		wantBody    string
	}{
		{
			name:        "plain 7bit",
			raw:         "From: a@test.invalid\nTo: b@test.invalid\nSubject: Hello\n\nline one\nline two\n",
			wantSubject: "Hello",
			wantBody:    "line one\nline two\n",
		},
		{
			name: "quoted-printable with soft breaks",
			raw: "From: a@test.invalid\nTo: b@test.invalid\nSubject: =?UTF-8?q?R=C3=A9initialiser?=\n" +
				"MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: quoted-printable\n\n" +
				"Open https://xcloak.test/reset?token=3Dabc%3D%3D&next=3D/home to con=\ntinue. Caf=C3=A9\n",
			wantSubject: "Réinitialiser",
			wantBody:    "Open https://xcloak.test/reset?token=abc%3D%3D&next=/home to continue. Café\n",
		},
		{
			name: "base64",
			raw: "From: a@test.invalid\nTo: b@test.invalid\nSubject: b64\n" +
				"Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n" +
				"aHR0cHM6Ly94Y2xvYWsudGVzdC9yZXNldD90b2tlbj1hYmMlM0QlM0QmbmV4dD0v\naG9tZQo=\n",
			wantSubject: "b64",
			wantBody:    link + "\n",
		},
		{
			name: "multipart/alternative picks text/plain",
			raw: "From: a@test.invalid\nTo: b@test.invalid\nSubject: alt\nMIME-Version: 1.0\n" +
				"Content-Type: multipart/alternative; boundary=XX\n\n" +
				"--XX\nContent-Type: text/html; charset=utf-8\n\n<p>html</p>\n" +
				"--XX\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\n" +
				"plain =3D text\n" +
				"--XX--\n",
			wantSubject: "alt",
			wantBody:    "plain = text",
		},
		{
			name: "nested multipart",
			raw: "From: a@test.invalid\nTo: b@test.invalid\nSubject: nested\nMIME-Version: 1.0\n" +
				"Content-Type: multipart/mixed; boundary=OUT\n\n" +
				"--OUT\nContent-Type: multipart/alternative; boundary=IN\n\n" +
				"--IN\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nCaf=E9\n" +
				"--IN--\n" +
				"--OUT\nContent-Type: application/octet-stream\n\nxx\n" +
				"--OUT--\n",
			wantSubject: "nested",
			wantBody:    "Café",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := testenv.SMTP(t)
			raw := crlf(tt.raw)
			if err := smtp.SendMail(sink.Addr(), nil, "a@test.invalid", []string{"b@test.invalid", "c@test.invalid"}, raw); err != nil {
				t.Fatalf("SendMail: %v", err)
			}
			got := sink.WaitFor(t, "C@test.invalid")
			if got.Helo != "localhost" {
				t.Errorf("Helo = %q, want localhost, net/smtp's", got.Helo)
			}
			if got.From != "a@test.invalid" {
				t.Errorf("From = %q, want a@test.invalid", got.From)
			}
			if want := []string{"b@test.invalid", "c@test.invalid"}; !slices.Equal(got.To, want) {
				t.Errorf("To = %q, want %q", got.To, want)
			}
			if got.Subject != tt.wantSubject {
				t.Errorf("Subject = %q, want %q", got.Subject, tt.wantSubject)
			}
			if got.Body != tt.wantBody {
				t.Errorf("Body = %q, want %q", got.Body, tt.wantBody)
			}
			if string(got.Raw) != string(raw) {
				t.Errorf("Raw = %q, want %q", got.Raw, raw)
			}
			if h := got.Header.Get("To"); h != "b@test.invalid" {
				t.Errorf("Header To = %q, want b@test.invalid", h)
			}
		})
	}
}

func TestSMTPSinkRefusesUnparseableMessage(t *testing.T) {
	sink := testenv.SMTP(t)
	raw := crlf("From: a@test.invalid\nSubject: html only\nContent-Type: text/html\n\n<p>hi</p>\n")
	err := smtp.SendMail(sink.Addr(), nil, "a@test.invalid", []string{"b@test.invalid"}, raw)
	if err == nil || !strings.Contains(err.Error(), "554") {
		t.Errorf("SendMail error = %v, want a 554 reply", err)
	}
	if got := sink.Messages(); len(got) != 0 {
		t.Errorf("Messages() holds %d messages, want 0", len(got))
	}
}

func TestSMTPSinkWaitForReturnsEachMessageOnce(t *testing.T) {
	sink := testenv.SMTP(t)
	send := func(to, subject string) {
		t.Helper()
		raw := crlf("From: a@test.invalid\nSubject: " + subject + "\n\nbody\n")
		if err := smtp.SendMail(sink.Addr(), nil, "a@test.invalid", []string{to}, raw); err != nil {
			t.Fatalf("SendMail: %v", err)
		}
	}
	send("x@test.invalid", "first")
	send("y@test.invalid", "other")
	send("x@test.invalid", "second")

	for _, want := range []string{"first", "second"} {
		if got := sink.WaitFor(t, "x@test.invalid").Subject; got != want {
			t.Errorf("WaitFor subject = %q, want %q", got, want)
		}
	}
	if got := sink.WaitFor(t, "y@test.invalid").Subject; got != "other" {
		t.Errorf("WaitFor subject = %q, want %q", got, "other")
	}

	msgs := sink.Messages()
	var subjects []string
	for _, m := range msgs {
		subjects = append(subjects, m.Subject)
	}
	if want := []string{"first", "other", "second"}; !slices.Equal(subjects, want) {
		t.Errorf("Messages() subjects = %q, want %q in arrival order", subjects, want)
	}

	// Messages returns copies: changing one must not change the sink's.
	msgs[0].To[0] = "changed"
	msgs[0].Raw[0] = '!'
	msgs[0].Header["Subject"][0] = "changed"
	again := sink.Messages()[0]
	if again.To[0] != "x@test.invalid" || again.Raw[0] == '!' || again.Header.Get("Subject") != "first" {
		t.Errorf("changing a returned message changed the sink's copy: %+v", again)
	}
}

func TestSMTPSinkURL(t *testing.T) {
	sink := testenv.SMTP(t)
	want := "smtp://" + sink.Addr() + "?from=xcloak@test.invalid&tls=none"
	if got := sink.URL(); got != want {
		t.Errorf("URL() = %q, want %q", got, want)
	}
	if !strings.HasPrefix(sink.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q, want 127.0.0.1:PORT", sink.Addr())
	}
}
