package main

import (
	"testing"
	"time"
)

func TestHistogramPercentile(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{
		{50, 500 * time.Millisecond},
		{99, 990 * time.Millisecond},
		{100, 1000 * time.Millisecond},
	}
	for _, tt := range tests {
		got := h.percentile(tt.p)
		// Buckets are at most 1/32 wide and the answer is a bucket's top.
		if got < tt.want || got > tt.want+tt.want/32 {
			t.Errorf("p%v = %s, want %s to %s", tt.p, got, tt.want, tt.want+tt.want/32)
		}
	}
}

func TestHistogramBuckets(t *testing.T) {
	for _, us := range []int64{0, 1, 63, 64, 65, 1000, 123456, 1 << 40} {
		i := histIndex(us)
		if up := histUpper(i); up < us {
			t.Errorf("%dµs lands in bucket %d whose top is %d", us, i, up)
		}
		if i > 0 && histUpper(i-1) >= us {
			t.Errorf("%dµs lands in bucket %d, but bucket %d already reaches %d", us, i, i-1, histUpper(i-1))
		}
	}
}

func TestPercentileOf(t *testing.T) {
	s := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {10, 1}} {
		if got := percentileOf(s, tt.p); got != tt.want {
			t.Errorf("p%v = %d, want %d", tt.p, got, tt.want)
		}
	}
	if got := percentileOf(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %d, want 0", got)
	}
}

// TestNearestRank: the rank of a percentile is the smallest whose share
// of the samples reaches it, with no floating-point rank too many.
func TestNearestRank(t *testing.T) {
	for _, c := range []struct {
		p    float64
		n    int64
		want int64
	}{
		{99.9, 1000, 999}, {99.9, 1001, 1000}, {99, 160, 159}, {99, 100, 99}, {99, 101, 100},
		{50, 1, 1}, {50, 2, 1}, {50, 3, 2}, {100, 7, 7}, {0.1, 1000, 1},
	} {
		if got := nearestRank(c.p, c.n); got != c.want {
			t.Errorf("nearestRank(%v, %d) = %d, want %d", c.p, c.n, got, c.want)
		}
	}
}
