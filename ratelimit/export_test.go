package ratelimit

import (
	"encoding/binary"
	"fmt"
)

// Slot is slot, for tests that need rules whose keys share a cluster slot.
var Slot = slot

// DecodeLog returns the times, in microseconds of Redis' clock, that a
// packed log (sliding_window.lua) holds, oldest first: what tests read to
// check a log against its answers.
func DecodeLog(raw string) ([]int64, error) {
	if len(raw) < 8 {
		return nil, fmt.Errorf("log of %d bytes, shorter than its header", len(raw))
	}
	w := int(raw[0])
	if w < 4 || w > 6 || (len(raw)-8)%w != 0 {
		return nil, fmt.Errorf("log of %d bytes with entries of %d", len(raw), w)
	}
	var b [8]byte
	copy(b[:], raw[1:8])
	base := int64(binary.LittleEndian.Uint64(b[:]))
	var out []int64
	for i := 8; i < len(raw); i += w {
		b = [8]byte{}
		copy(b[:], raw[i:i+w])
		out = append(out, base+int64(binary.LittleEndian.Uint64(b[:])))
	}
	return out, nil
}

// EncodeLog packs times (oldest first) into a log with entries of width
// bytes from base, for tests that plant a log Redis would only reach after
// years or a change of settings.
func EncodeLog(width int, base int64, times ...int64) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(base))
	out := append([]byte{byte(width)}, b[:7]...)
	for _, t := range times {
		binary.LittleEndian.PutUint64(b[:], uint64(t-base))
		out = append(out, b[:width]...)
	}
	return string(out)
}
