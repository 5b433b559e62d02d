package webhook

import (
	"testing"
	"time"
)

// TestBackoffNeverWrapsShort: however large MinBackoff and however many
// the retries, the wait's ceiling doubles up to MaxBackoff and stays
// there: MinBackoff shifted left by the retries' count could wrap around
// to a short positive wait, a retry storm against a receiver that is
// down.
func TestBackoffNeverWrapsShort(t *testing.T) {
	least := time.Duration(1<<34 + 1) // shifted by 30, wraps to 2^30 ns
	s := &Sender{cfg: Config{MinBackoff: least, MaxBackoff: 100 * least}}
	for n := 1; n <= 64; n++ {
		want := least << min(n-1, 7) // doubled until past MaxBackoff
		if want > s.cfg.MaxBackoff {
			want = s.cfg.MaxBackoff
		}
		longest := time.Duration(0)
		for range 200 {
			longest = max(longest, s.backoff(n))
		}
		// A full jitter over the ceiling: 200 draws reach past a tenth of it.
		if longest < want/10 || longest > want {
			t.Fatalf("retry %d: longest of 200 waits %v, want within (%v, %v]", n, longest, want/10, want)
		}
	}
}
