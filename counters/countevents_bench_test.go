package counters

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
)

// BenchmarkCountEventsIntoFullRankings counts, as the Recorder does, a
// batch of 1,000 rejections from sources new to the current minute's and
// hour's rankings, both already full: the write side of a distributed
// attack. It reports the longest single command (the batch's MULTI/EXEC
// runs as one), Redis' CPU time per batch (from INFO cpu) and the batch's
// time as the Recorder waits for it.
//
//	go test -run '^$' -bench BenchmarkCountEventsIntoFullRankings -benchtime=20x ./counters/
func BenchmarkCountEventsIntoFullRankings(b *testing.B) {
	rdb, s, _ := privateFlood(b)
	ctx := context.Background()
	slowest(b, rdb)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	var longest time.Duration
	cpu0 := redisCPU(b, rdb)
	at := floodNow.Truncate(time.Minute)
	n := 0
	for b.Loop() {
		batch := make([]auth.Event, 0, 1000)
		for i := range 1000 {
			batch = append(batch, auth.Event{At: at, Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP,
				Source: fmt.Sprintf("192.%d.%d.%d", n%200, i/256, i%256), Account: fmt.Sprintf("w%d-%d@example.com", n, i)})
		}
		n++
		if err := s.CountEvents(ctx, batch); err != nil {
			b.Fatal(err)
		}
		if d, _ := slowest(b, rdb); d > longest {
			longest = d
		}
	}
	b.ReportMetric(float64(longest.Microseconds()), "longest-µs")
	b.ReportMetric(float64((redisCPU(b, rdb)-cpu0).Microseconds())/float64(b.N), "redis-cpu-µs/batch")
}

// redisCPU is the CPU time Redis has used, user and system.
func redisCPU(tb testing.TB, rdb interface {
	Info(context.Context, ...string) *redis.StringCmd
}) time.Duration {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					tb.Fatal(err)
				}
				total += x
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
