package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// inOutage is a Failover in an outage, deciding in process.
func inOutage(b *testing.B) *Failover {
	b.Helper()
	local, err := NewLocal(map[string]LockoutPolicy{"login_account": {Threshold: 10, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour}}, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	f := NewFailover(nil, local, nil, FailLocal, nil)
	f.degraded.Store(true)
	return f
}

// degradedFailover is a Failover in an outage with maxMade locks of
// login_account made in process, held there too.
func degradedFailover(b *testing.B) (*Failover, []string) {
	b.Helper()
	f := inOutage(b)
	ids := make([]string, maxMade)
	locks := make([]HeldLock, maxMade)
	for i := range ids {
		ids[i] = fmt.Sprint("acct-", i)
		locks[i] = HeldLock{Name: "login_account", ID: ids[i], Since: time.Now(), Until: time.Now().Add(time.Hour), Level: 1}
	}
	if err := f.local.Hold(context.Background(), locks...); err != nil {
		b.Fatal(err)
	}
	f.madeMu.Lock()
	for _, h := range locks {
		f.noteMade(h)
	}
	f.madeMu.Unlock()
	return f, ids
}

// BenchmarkFailoverClearAfterOutage measures an unlock during an outage
// in which maxMade locks were made in process.
func BenchmarkFailoverClearAfterOutage(b *testing.B) {
	f, ids := degradedFailover(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if _, err := f.Clear(ctx, "login_account", ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
