package smtpmail_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/smtpmail"
)

// hostileServer accepts connections on 127.0.0.1 and hands each to serve;
// it returns the server's address. Connections and the listener are
// closed when the test ends.
func hostileServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				stop := context.AfterFunc(t.Context(), func() { c.Close() })
				defer stop()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestMailerGivesUpWhenTheContextEnds: a server that greets and then
// says nothing holds a Send no longer than its context, not for the ten
// seconds of a stage's deadline.
func TestMailerGivesUpWhenTheContextEnds(t *testing.T) {
	addr := hostileServer(t, func(c net.Conn) {
		if _, err := c.Write([]byte("220 mail.example ESMTP\r\n")); err != nil {
			return
		}
		// Read EHLO and what follows, answer nothing.
		_, _ = bufio.NewReader(c).ReadString(0)
	})
	mailer, err := smtpmail.New("smtp://" + addr + "?tls=none&from=xcloak@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = mailer.Send(ctx, auth.Message{To: "ada@example.com", Subject: "s", Body: "b"})
	// Under the ten seconds a Send held by its own deadline takes, with
	// the rest left to a loaded machine that is late.
	if took := time.Since(began); took > 8*time.Second {
		t.Errorf("Send took %v with a context of 300ms", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Send error = %v, want it to wrap context.DeadlineExceeded", err)
	}
}

// TestMailerBoundsTheServersAnswer: a server, or whoever answers for it
// before STARTTLS, that sends a reply without end is not read into
// memory until the stage's deadline: the Send fails once a bound is
// passed, having read a few megabytes at most.
func TestMailerBoundsTheServersAnswer(t *testing.T) {
	const most = 64 << 20
	for name, answer := range map[string]struct{ first, then string }{
		"one endless line":     {"220 ", strings.Repeat("x", 64<<10)},
		"endless continuation": {"", "220-" + strings.Repeat("x", 1000) + "\r\n"},
	} {
		t.Run(name, func(t *testing.T) {
			var written atomic.Int64
			addr := hostileServer(t, func(c net.Conn) {
				chunk := []byte(answer.first + answer.then)
				for written.Load() < most {
					_ = c.SetWriteDeadline(time.Now().Add(time.Second))
					n, err := c.Write(chunk)
					written.Add(int64(n))
					if err != nil {
						return
					}
					chunk = []byte(answer.then)
				}
			})
			mailer, err := smtpmail.New("smtp://" + addr + "?tls=none&from=xcloak@example.com")
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			err = mailer.Send(t.Context(), auth.Message{To: "ada@example.com", Subject: "s", Body: "b"})
			if err == nil {
				t.Fatal("Send succeeded, want an error")
			}
			// Under the ten seconds of the Send's deadline, which a Send
			// reading on would reach, with the rest left to a loaded
			// machine that is late.
			if took := time.Since(began); took > 8*time.Second {
				t.Errorf("Send took %v", took)
			}
			if n := written.Load(); n >= 16<<20 {
				t.Errorf("the server wrote %d MiB of its answer before Send stopped reading", n>>20)
			}
		})
	}
}

// TestMailerTakesAMailTakenAsSent: once the server has taken the message
// (its 250 after the data), what goes wrong with the commands that only
// end the session, RSET and QUIT, does not make the Send a failure: the
// mail is on its way, and a caller that counted it as not sent would say
// so of a link its owner received.
func TestMailerTakesAMailTakenAsSent(t *testing.T) {
	for name, after := range map[string]func(c net.Conn, cmd string) bool{
		"connection closed once it is taken": func(net.Conn, string) bool { return false },
		"RSET refused, then QUIT unanswered": func(c net.Conn, cmd string) bool {
			answer := "250 ok"
			switch {
			case strings.HasPrefix(cmd, "RSET"):
				answer = "502 5.5.1 not implemented"
			case strings.HasPrefix(cmd, "QUIT"):
				return false
			}
			_, err := c.Write([]byte(answer + "\r\n"))
			return err == nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			var taken atomic.Bool
			addr := hostileServer(t, func(c net.Conn) {
				r := bufio.NewReader(c)
				say := func(s string) bool { _, err := c.Write([]byte(s + "\r\n")); return err == nil }
				if !say("220 mail.example ESMTP") {
					return
				}
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					cmd := strings.ToUpper(strings.TrimSpace(line))
					switch {
					case taken.Load():
						if !after(c, cmd) {
							return
						}
					case strings.HasPrefix(cmd, "EHLO"):
						say("250-mail.example\r\n250 8BITMIME")
					case strings.HasPrefix(cmd, "DATA"):
						say("354 go on")
						if _, err := io.Copy(io.Discard, textproto.NewReader(r).DotReader()); err != nil {
							return
						}
						taken.Store(true)
						say("250 2.0.0 queued")
					default: // NOOP, MAIL, RCPT
						say("250 ok")
					}
				}
			})
			mailer, err := smtpmail.New("smtp://" + addr + "?tls=none&from=xcloak@example.com")
			if err != nil {
				t.Fatal(err)
			}
			err = mailer.Send(t.Context(), auth.Message{To: "ada@example.com", Subject: "s", Body: "b"})
			if !taken.Load() {
				t.Fatalf("the server took no mail (Send: %v)", err)
			}
			if err != nil {
				t.Errorf("Send = %v for a mail the server took, want nil", err)
			}
		})
	}
}
