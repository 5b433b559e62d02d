package smtpmail_test

import (
	"bufio"
	"context"
	"errors"
	"net"
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
