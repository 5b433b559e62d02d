package attack_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
)

// TestMemoryIsFlat runs a five-minute attack, two attempts from each of n
// distinct addresses spread over the IPv4 space (so almost every /24 is new
// too) for 10,000 accounts and 5,000 unknown ones, through one watch, and
// sums MEMORY USAGE over every key the watch wrote. The number of keys
// depends only on time; their sizes are bounded by HyperLogLogs (12 KB at
// most) and capped rankings, so the total must not grow with n.
//
//	go test -run TestMemoryIsFlat -v ./attack/
func TestMemoryIsFlat(t *testing.T) {
	const span = 5 * time.Minute
	var sizes []int64
	for _, n := range []int{1_000, 10_000, 100_000} {
		rdb, prefix := testenv.Redis(t)
		clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
		w, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: rdb, Prefix: prefix, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(n), 12))
		attempts := 2 * n
		perSecond := attempts / int(span/time.Second)
		for i := range attempts {
			addr := netip.AddrFrom4([4]byte{byte(1 + rng.IntN(223)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(i / 2)})
			o, account := auth.OutcomeFailed, fmt.Sprintf("user%d@example.com", rng.IntN(10_000))
			if i%3 == 0 {
				o, account = auth.OutcomeUnknownAccount, fmt.Sprintf("nobody%d@example.com", rng.IntN(5_000))
			}
			w.Observe(auth.SignInAttempt{At: clk.Now(), Account: account, Client: auth.Client{Addr: addr}, Outcome: o})
			if (i+1)%perSecond == 0 {
				tick(t, w)
				clk.Add(time.Second)
			}
		}
		tick(t, w)
		var keys int
		var bytes int64
		iter := rdb.Scan(t.Context(), 0, prefix+"*", 1000).Iterator()
		for iter.Next(t.Context()) {
			keys++
			bytes += rdb.MemoryUsage(t.Context(), iter.Val()).Val()
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%7d addresses, %7d attempts in %s: %4d keys, %7d bytes (%.1f KiB)", n, attempts, span, keys, bytes, float64(bytes)/1024)
		sizes = append(sizes, bytes)
	}
	if sizes[2] > sizes[1]*5/4 {
		t.Errorf("memory grew from %d bytes (10,000 addresses) to %d (100,000)", sizes[1], sizes[2])
	}
}
