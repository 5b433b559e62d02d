package ratelimit

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Slot is slot, for tests that need rules whose keys share a cluster slot.
var Slot = slot

// TakeBackTimeout bounds the take-back of a decision split over a
// cluster's slots: one that waited longer was abandoned, by design.
const TakeBackTimeout = takeBackTimeout

// logHeader is the length of a packed log's header: its entries' width,
// base and expiry (sliding_window.lua).
const logHeader = 14

// DecodeLog returns the times, in microseconds of Redis' clock, that a
// packed log (sliding_window.lua) holds, oldest first: what tests read to
// check a log against its answers.
func DecodeLog(raw string) ([]int64, error) {
	if len(raw) < logHeader {
		return nil, fmt.Errorf("log of %d bytes, shorter than its header", len(raw))
	}
	w := int(raw[0])
	if w < 4 || w > 6 || (len(raw)-logHeader)%w != 0 {
		return nil, fmt.Errorf("log of %d bytes with entries of %d", len(raw), w)
	}
	base := int64(uintN(raw[1:8]))
	var out []int64
	for i := logHeader; i < len(raw); i += w {
		out = append(out, base+int64(uintN(raw[i:i+w])))
	}
	return out, nil
}

// LogExpiry returns the expiry, in milliseconds since the epoch, that a
// packed log's header says its key was last given (0: not known).
func LogExpiry(raw string) (int64, error) {
	if len(raw) < logHeader {
		return 0, fmt.Errorf("log of %d bytes, shorter than its header", len(raw))
	}
	return int64(uintN(raw[8:14])), nil
}

// uintN reads up to 8 bytes, little-endian.
func uintN(b string) uint64 {
	var buf [8]byte
	copy(buf[:], b)
	return binary.LittleEndian.Uint64(buf[:])
}

// EncodeLog packs times (oldest first) into a log with entries of width
// bytes from base, for tests that plant a log Redis would only reach after
// years or a change of settings. Its header gives no expiry (0), so that
// the next admission sets the key's expiry whatever the test gave it.
func EncodeLog(width int, base int64, times ...int64) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(base))
	out := append([]byte{byte(width)}, b[:7]...)
	out = append(out, 0, 0, 0, 0, 0, 0)
	for _, t := range times {
		binary.LittleEndian.PutUint64(b[:], uint64(t-base))
		out = append(out, b[:width]...)
	}
	return string(out)
}

// EncodeLogExpiring is EncodeLog with a header that gives the key's expiry
// as expiry, in milliseconds since the epoch: a log as an admission within
// the last eighth of a window left it, whose next admissions keep the
// key's expiry and write the value alone.
func EncodeLogExpiring(width int, base, expiry int64, times ...int64) string {
	out := []byte(EncodeLog(width, base, times...))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(expiry))
	copy(out[8:logHeader], b[:])
	return string(out)
}

// Sizes is how many logs, failure counts and locks l keeps.
func (l *Local) Sizes() (logs, lockouts, locks int) {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		logs += sh.logs.len()
		lockouts += sh.lockouts.len()
		locks += sh.locks.len()
		sh.mu.Unlock()
	}
	return logs, lockouts, locks
}

// Locks is how many locks, in force or recent, l keeps.
func (l *Local) Locks() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += sh.locks.len()
		sh.mu.Unlock()
	}
	return n
}

// MaxMade bounds, per rule, the locks made in process a Failover keeps.
const MaxMade = maxMade

// AgeMade makes the locks f made in process look made d earlier.
func AgeMade(f *Failover, d time.Duration) {
	f.madeMu.Lock()
	defer f.madeMu.Unlock()
	for i := range f.made {
		if !f.made[i].Until.IsZero() {
			f.made[i].Until = f.made[i].Until.Add(-d)
			f.made[i].Since = f.made[i].Since.Add(-d)
		}
	}
}

// Kept is what f keeps for the next failback to give Redis: the locks and
// the unlocks made in process. A failback that Redis took, its last
// unlocks ended, keeps neither: tests wait for that to know it is over.
func Kept(f *Failover) (made, cleared int) {
	f.madeMu.Lock()
	defer f.madeMu.Unlock()
	return len(f.made), len(f.cleared)
}

// WhileScanning has f's next failbacks call fn between their scans of
// the locks to hand Redis.
func WhileScanning(f *Failover, fn func()) { f.scanning = fn }

// Restoring is the channel that the load of the lockouts in force, begun
// at f's current outage, closes once it is loaded, has failed, or is
// dropped as stale; nil before any outage.
func Restoring(f *Failover) <-chan struct{} {
	if p := f.restored.Load(); p != nil {
		return *p
	}
	return nil
}

// Looked is how many entries of the locks and unlocks made in process f's
// unlocks and failbacks have read (Failover.looked).
func Looked(f *Failover) int {
	f.madeMu.Lock()
	defer f.madeMu.Unlock()
	return f.looked
}
