package testenv

import (
	"net/http"
	"testing"
	"time"
)

// SilentUpgrade returns a handler that answers 101 Switching Protocols and
// then says nothing, holding the connection open until the test's context
// ends (before its cleanups run) or 5 s pass. Go's client hands such an
// answer's bare connection over as its body, which the request's context
// no longer bounds: a client that reads it without a bound of its own
// hangs.
func SilentUpgrade(t testing.TB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: anything\r\nConnection: Upgrade\r\n\r\n")
		buf.Flush()
		select {
		case <-t.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
}
