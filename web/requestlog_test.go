package web

import (
	"strings"
	"testing"
	"unicode/utf8"
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

// TestLoggablePathBounded: a made-up path as long as the request line
// allows is logged cut, with its length, at a character's start, so that
// a flood of them does not write tens of kilobytes a line into the log.
func TestLoggablePathBounded(t *testing.T) {
	long := "/" + strings.Repeat("é", 30_000)
	got := loggablePath(long)
	if len(got) > maxLoggedPath+32 || !strings.HasSuffix(got, "…(60001 bytes)") || !utf8.ValidString(got) {
		t.Errorf("a path of %d bytes logged as %d bytes ending %q", len(long), len(got), got[max(0, len(got)-20):])
	}
	if got := loggablePath("/account/sessions"); got != "/account/sessions" {
		t.Errorf("a route's path logged as %q", got)
	}
}
