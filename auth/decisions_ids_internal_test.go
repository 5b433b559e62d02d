package auth

import (
	"testing"
	"time"
)

// TestAttemptDecided: an id tells when its decision was made to the
// millisecond; one issued before ids kept milliseconds, to the second.
func TestAttemptDecided(t *testing.T) {
	k := newDecisionKeys([]byte("test-secret-0123456789abcdef-0123456789"))
	now := time.Date(2026, 12, 5, 12, 0, 0, 300_400_000, time.UTC)
	for _, tc := range []struct {
		a    attempt
		want time.Time
	}{
		{attempt{Kind: AttemptLogin, IssuedAt: now.Unix(), IssuedMilli: now.UnixMilli()}, now.Truncate(time.Millisecond)},
		{attempt{Kind: AttemptLogin, IssuedAt: now.Unix()}, now.Truncate(time.Second)},
	} {
		a, ok := k.open(k.issue(tc.a), now)
		if !ok {
			t.Fatalf("%+v: not opened", tc.a)
		}
		if got := a.decided(); !got.Equal(tc.want) {
			t.Errorf("%+v decided %s, want %s", tc.a, got, tc.want)
		}
	}
}
