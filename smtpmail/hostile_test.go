package smtpmail_test

import (
	"bufio"
	"context"
	"errors"
	"net"
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
	if took := time.Since(began); took > 3*time.Second {
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
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("Send took %v", took)
			}
			if n := written.Load(); n >= 16<<20 {
				t.Errorf("the server wrote %d MiB of its answer before Send stopped reading", n>>20)
			}
		})
	}
}
