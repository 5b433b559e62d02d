package web

import (
	"strings"
	"testing"
)

// TestLoggablePathHidesAttemptIDs: the outcome route's path holds an
// attempt id, whose payload is the application's account and its client's
// address in base64; the request log names the route, never the id.
func TestLoggablePathHidesAttemptIDs(t *testing.T) {
	id := "eyJrIjoxLCJ0IjoibG9naW4iLCJhIjoiYWxpY2VAZXhhbXBsZS5jb20iLCJpcCI6IjE5Mi4wLjIuMSJ9.c2lnbmF0dXJl"
	got := loggablePath("/api/v1/attempts/" + id + "/outcome")
	if strings.Contains(got, id) || got != "/api/v1/attempts/{attempt_id}/outcome" {
		t.Fatalf("logged as %q, want /api/v1/attempts/{attempt_id}/outcome", got)
	}
	if got := loggablePath("/api/v1/attempts"); got != "/api/v1/attempts" {
		t.Fatalf("the decision route logged as %q", got)
	}
}
