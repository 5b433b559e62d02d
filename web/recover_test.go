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
	s := &Server{log: slog.New(slog.DiscardHandler)}
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
	resp, err = http.Get(srv.URL + "/late")
	if err != nil {
		return
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !strings.HasPrefix(`{"partial":`, string(body)) {
		t.Errorf("panic after answering: read %q, %v; want the connection cut and nothing appended", body, err)
	}
}
