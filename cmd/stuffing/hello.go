package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/xcloak/xcloak/internal/cli"
)

const helloDescription = `Serves a bare Go handler that answers every request with 200 and
"hello", with nothing else in the way: the most requests per second
net/http does on this machine, to compare XCloak's rejections with. Serves
until interrupted.
`

func helloCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "hello", "[flags]", helloDescription)
	addr := fs.String("addr", "127.0.0.1:18081", "`host:port` to listen on; port 0 picks a free one")
	allow := fs.Bool("allow-non-loopback", false, "allow listening on an address that is not loopback")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := checkHostPort(ctx, *addr, *allow); err != nil {
		return badFlag(stderr, "--addr: %v", err)
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: helloHandler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "hello listening on http://%s\n", l.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// helloHandler reads the body, as XCloak does, and answers "hello".
func helloHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "hello\n")
	})
}

// answerHandler reads the body, as XCloak does, and answers with a as
// XCloak wrote it: its status, its headers but Date, which net/http
// writes anew, and its body.
func answerHandler(a answer) http.Handler {
	header := a.headers.Clone()
	header.Del("Date")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10))
		h := w.Header()
		for k, v := range header {
			h[k] = v
		}
		w.WriteHeader(a.StatusCode)
		_, _ = w.Write(a.body)
	})
}
