package templates

import (
	"testing"
	"time"
)

func TestRetryText(t *testing.T) {
	tests := []struct {
		name    string
		seconds int
		want    string
	}{
		{"negative", -5, "Too many attempts. Try again in a moment."},
		{"zero", 0, "Too many attempts. Try again in a moment."},
		{"one second is singular", 1, "Too many attempts. Try again in 1 second."},
		{"a few seconds", 45, "Too many attempts. Try again in 45 seconds."},
		{"one minute stays in seconds", 60, "Too many attempts. Try again in 60 seconds."},
		{"just under two minutes", 119, "Too many attempts. Try again in 119 seconds."},
		{"exactly two minutes", 120, "Too many attempts. Try again in 2 minutes."},
		{"rounds up past two minutes", 121, "Too many attempts. Try again in 3 minutes."},
		{"exactly fifteen minutes", 900, "Too many attempts. Try again in 15 minutes."},
		{"one second over fifteen minutes", 901, "Too many attempts. Try again in 16 minutes."},
		{"a day", 86400, "Too many attempts. Try again in 1440 minutes."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryText(tt.seconds); got != tt.want {
				t.Errorf("RetryText(%d) = %q, want %q", tt.seconds, got, tt.want)
			}
		})
	}
}

func TestTimeText(t *testing.T) {
	paris := time.FixedZone("CEST", 2*60*60)
	tests := []struct {
		name         string
		t            time.Time
		wantDate     string
		wantDateTime string
	}{
		{"zero time", time.Time{}, "Unknown", "Unknown"},
		{"utc", time.Date(2024, 3, 9, 7, 5, 0, 0, time.UTC), "9 March 2024", "9 March 2024 at 07:05 UTC"},
		{"other zone is shown in utc", time.Date(2024, 1, 1, 1, 30, 0, 0, paris), "31 December 2023", "31 December 2023 at 23:30 UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dateText(tt.t); got != tt.wantDate {
				t.Errorf("dateText(%v) = %q, want %q", tt.t, got, tt.wantDate)
			}
			if got := dateTimeText(tt.t); got != tt.wantDateTime {
				t.Errorf("dateTimeText(%v) = %q, want %q", tt.t, got, tt.wantDateTime)
			}
		})
	}
}
