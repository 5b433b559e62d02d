package ratelimit_test

import (
	"testing"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

func TestParseLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ratelimit.Limit
		ok   bool
	}{
		{"50/10m", ratelimit.Limit{Count: 50, Window: 10 * time.Minute}, true},
		{" 3 / 1h ", ratelimit.Limit{Count: 3, Window: time.Hour}, true},
		{"1/1ms", ratelimit.Limit{Count: 1, Window: time.Millisecond}, true},
		{"20/90s", ratelimit.Limit{Count: 20, Window: 90 * time.Second}, true},
		{"", ratelimit.Limit{}, false},
		{"50", ratelimit.Limit{}, false},
		{"50/", ratelimit.Limit{}, false},
		{"/10m", ratelimit.Limit{}, false},
		{"0/10m", ratelimit.Limit{}, false},
		{"-1/10m", ratelimit.Limit{}, false},
		{"50/0s", ratelimit.Limit{}, false},
		{"50/-1m", ratelimit.Limit{}, false},
		{"50/10", ratelimit.Limit{}, false},
		{"50/1us", ratelimit.Limit{}, false},
		{"50/1000h", ratelimit.Limit{}, false},
		{"1000000/1m", ratelimit.Limit{}, false},
		{"99999999999999999999/1m", ratelimit.Limit{}, false},
		{"ten/1m", ratelimit.Limit{}, false},
	} {
		got, err := ratelimit.ParseLimit(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseLimit(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok {
			back, err := ratelimit.ParseLimit(got.String())
			if err != nil || back != got {
				t.Errorf("ParseLimit(%q.String()=%q) = %v, %v; want it back", tc.in, got.String(), back, err)
			}
		}
	}
}
