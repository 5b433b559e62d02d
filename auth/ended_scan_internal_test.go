package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"
)

// BenchmarkEndedSessionsNearlyFull: the memory full with one entry
// expired at each add, the rate a steady ~833 ended tokens a second
// keeps it at.
func BenchmarkEndedSessionsNearlyFull(b *testing.B) {
	var e endedSessions
	t0 := time.Unix(1_000_000, 0)
	var key [sha256.Size]byte
	step := endedSessionTTL / endedSessionMax
	for i := range endedSessionMax {
		binary.BigEndian.PutUint64(key[:], uint64(i))
		e.add(key, t0.Add(time.Duration(i)*step))
	}
	b.ResetTimer()
	for i := range b.N {
		n := endedSessionMax + i
		binary.BigEndian.PutUint64(key[:], uint64(n))
		e.add(key, t0.Add(time.Duration(n)*step+step/2))
	}
}
