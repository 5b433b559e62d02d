package web_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/web"
)

// TestLoggedMethodBounded: net/http takes any token as a method, up to the
// header's bound of 64 KiB, and the mux answers an unknown one 405, a line
// of the request log at info. A client's made-up method is cut there as a
// made-up path is, rather than writing some 64 KiB a request into the log.
func TestLoggedMethodBounded(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	var buf syncBuffer
	h := web.NewServer(env.Web, env.Service, env.Dashboard, nil, slog.New(slog.NewJSONHandler(&buf, nil)))
	srv := httptest.NewServer(h)
	defer srv.Close()

	method := strings.Repeat("X", 60_000)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "%s /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", method); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("status %d, want 405", resp.StatusCode)
	}
	srv.Close() // the request's line is written
	line := buf.String()
	if !strings.Contains(line, `"status":405`) {
		t.Fatalf("no request line logged:\n%.300s", line)
	}
	if len(line) > 2048 || !strings.Contains(line, "(60000 bytes)") {
		t.Errorf("a method of %d bytes made a log line of %d bytes: %.300s", len(method), len(line), line)
	}
}
