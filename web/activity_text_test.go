package web

import (
	"net/url"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestActivityTextEveryKind: every kind the activity list holds is said in
// words, never shown as its raw name.
func TestActivityTextEveryKind(t *testing.T) {
	for _, kind := range auth.ActivityKinds() {
		if got := activityText(auth.Activity{Kind: kind, Count: 1}); got == kind || got == "" {
			t.Errorf("activityText(%q) = %q, want words", kind, got)
		}
	}
	if got, want := activityText(auth.Activity{Kind: auth.EventLoginFailed, Count: 3}), "Failed sign-in attempts (3)"; got != want {
		t.Errorf("three failures: %q, want %q", got, want)
	}
}

// TestActivityPageQuery: the limit and cursor of a page, and what is
// refused.
func TestActivityPageQuery(t *testing.T) {
	tests := []struct {
		query     string
		wantLimit int
		wantID    int64
		wantErr   bool
	}{
		{"", defaultActivityPage, 0, false},
		{"limit=1", 1, 0, false},
		{"limit=50&cursor=1700000000000000000-42", 50, 42, false},
		{"limit=51", 0, 0, true},
		{"limit=0", 0, 0, true},
		{"limit=", 0, 0, true},
		{"limit=1e1", 0, 0, true},
		{"cursor=42", 0, 0, true},
		{"cursor=1-2-3", 0, 0, true},
		{"cursor=1700000000000000000-0", 0, 0, true},
		{"cursor=1700000000000000000-42&cursor=1700000000000000000-43", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			cursor, limit, err := activityPage(q)
			if (err != nil) != tt.wantErr || (err == nil && (limit != tt.wantLimit || cursor.ID != tt.wantID)) {
				t.Errorf("activityPage(%q) = %+v, %d, %v; want limit %d, id %d, error %v", tt.query, cursor, limit, err, tt.wantLimit, tt.wantID, tt.wantErr)
			}
		})
	}
}
