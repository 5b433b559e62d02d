package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// histogram counts durations in microseconds in buckets about 3% wide, so
// that percentiles of millions of requests take a few kilobytes. It is safe
// for concurrent use.
type histogram struct {
	buckets [histSub + 32*58]atomic.Int64
}

// histSub values below it get a bucket each; above, each power of two is
// split into 32 buckets.
const histSub = 64

func histIndex(us int64) int {
	if us < histSub {
		return int(max(us, 0))
	}
	e := bits.Len64(uint64(us)) - 6 // us>>e is in [32, 64)
	return histSub + (e-1)*32 + int(us>>e) - 32
}

// histUpper is the largest value bucket i holds.
func histUpper(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	j := i - histSub
	e, m := j/32+1, int64(j%32+32)
	return (m+1)<<e - 1
}

func (h *histogram) add(d time.Duration) {
	h.buckets[histIndex(d.Microseconds())].Add(1)
}

func (h *histogram) count() int64 {
	var n int64
	for i := range h.buckets {
		n += h.buckets[i].Load()
	}
	return n
}

// percentile returns the p-th percentile (0 < p <= 100) by the nearest-rank
// method, rounded up to its bucket's upper bound; zero when empty.
func (h *histogram) percentile(p float64) time.Duration {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := nearestRank(p, n)
	var seen int64
	for i := range h.buckets {
		if seen += h.buckets[i].Load(); seen >= rank {
			return time.Duration(histUpper(i)) * time.Microsecond
		}
	}
	return 0
}

// percentileOf returns the p-th percentile of sorted samples by the
// nearest-rank method; zero when there are none.
func percentileOf(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(nearestRank(p, int64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// nearestRank is the rank of the p-th percentile of n samples, the
// smallest whose share reaches p, in integers: in floating point p/100*n
// comes out a hair over a whole rank (99.9 of 1,000 is 999.0000000000001)
// and rounds up one rank too many. p counts to a thousandth.
func nearestRank(p float64, n int64) int64 {
	milli := int64(math.Round(p * 1000))
	return (milli*n + 100_000 - 1) / 100_000
}
