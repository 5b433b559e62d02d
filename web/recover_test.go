package web

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPanicAfterTheAnswerBegan: a handler that panics before answering
// gets a 500; one that panics once its answer has begun has its
// connection cut, so that the client sees a broken answer rather than a
// whole one with an error appended to it.
func TestPanicAfterTheAnswerBegan(t *testing.T) {
	// slog's handler writes one line at a time; srv.Close waits for the
	// handlers before the lines are read.
	var log strings.Builder
	s := &Server{log: slog.New(slog.NewJSONHandler(&log, nil)), clientIP: NewClientIPResolver(nil, "")}
	srv := httptest.NewServer(s.logRequests(s.recoverPanics(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/late" {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"partial":`)
		}
		panic("broken")
	}))))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/api/v1/early")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "error") {
		t.Errorf("panic before answering: %d %s, want 500", resp.StatusCode, body)
	}

	// Cut before or after net/http sent what it had buffered: no answer,
	// or one that breaks off where the handler stopped.
	if resp, err = http.Get(srv.URL + "/late"); err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || !strings.HasPrefix(`{"partial":`, string(body)) {
			t.Errorf("panic after answering: read %q, %v; want the connection cut and nothing appended", body, err)
		}
	}
	srv.Close() // waits for the handlers, and so for their lines
	// Both requests are in the access log: the one cut off as an error,
	// with the status it had begun with.
	lines := log.String()
	for _, want := range []string{
		`"level":"ERROR","msg":"request","method":"GET","path":"/api/v1/early","status":500,`,
		`"level":"ERROR","msg":"request","method":"GET","path":"/late","status":200,`,
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("access log lacks %s:\n%s", want, lines)
		}
	}
	// The client may send /late again on a new connection once the first
	// was cut: each is cut, and says so.
	for line := range strings.Lines(lines) {
		isRequest := strings.Contains(line, `"msg":"request"`)
		late := strings.Contains(line, `"path":"/late"`)
		if cut := strings.HasSuffix(line, `"cut":true}`+"\n"); isRequest && cut != late {
			t.Errorf("only the requests cut off should say so: %s", line)
		}
	}
}
