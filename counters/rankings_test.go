package counters

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
)

// floodNow is the instant the flood's rankings are read at: the last
// minute of an hour, so that the 1-hour ranking spans 60 minute sets and
// the 24-hour one 25 hour sets.
var floodNow = time.Date(2025, 3, 10, 12, 59, 30, 0, time.UTC)

// fillFlood counts, through CountEvents as the Recorder does, a
// distributed attack: in each of the 60 minutes of the hour before
// floodNow, minuteRankCap distinct sources and accounts, none seen in
// another minute, and in each of the 24 hours before, hourRankCap more.
// It returns the exact counts of each ranking, by period.
func fillFlood(t testing.TB, s *Stats) map[dashboard.Period]map[TopKind]map[string]float64 {
	t.Helper()
	want := map[dashboard.Period]map[TopKind]map[string]float64{}
	for _, p := range []dashboard.Period{dashboard.Period1h, dashboard.Period24h} {
		want[p] = map[TopKind]map[string]float64{TopSources: {}, TopAccounts: {}}
	}
	count := func(batch []auth.Event, periods ...dashboard.Period) {
		if err := s.CountEvents(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		for _, e := range batch {
			for _, p := range periods {
				want[p][TopSources][e.Source]++
				want[p][TopAccounts][e.Account]++
			}
		}
	}
	last := unixMinute(floodNow)
	for m := last - 59; m <= last; m++ {
		batch := make([]auth.Event, 0, minuteRankCap)
		for i := range minuteRankCap {
			// A few repeat within their minute, so that counts differ.
			n := 1 + (i%7)/6 + (i%97)/96*3
			for range n {
				batch = append(batch, auth.Event{At: time.Unix(m*60, 0), Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP,
					Source: fmt.Sprintf("10.%d.%d.%d", m%60, i/256, i%256), Account: fmt.Sprintf("m%d-%d@example.com", m%60, i)})
			}
		}
		count(batch[:len(batch)/2], dashboard.Period1h, dashboard.Period24h)
		count(batch[len(batch)/2:], dashboard.Period1h, dashboard.Period24h)
	}
	for h := last/60 - 24; h < last/60; h++ {
		batch := make([]auth.Event, 0, hourRankCap)
		for i := range hourRankCap {
			// Spread over the hour's minutes: no minute set overflows.
			m := h*60 + int64(i%60)
			batch = append(batch, auth.Event{At: time.Unix(m*60, 0), Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP,
				Source: fmt.Sprintf("172.%d.%d.%d", h%24, i/256, i%256), Account: fmt.Sprintf("h%d-%d@example.com", h%24, i)})
		}
		count(batch, dashboard.Period24h)
	}
	return want
}

// exactTop is the top n of counts, ordered as Top orders them.
func exactTop(counts map[string]float64, n int) []dashboard.Ranked {
	out := make([]dashboard.Ranked, 0, len(counts))
	for name, c := range counts {
		out = append(out, dashboard.Ranked{Name: name, Count: int64(c)})
	}
	slices.SortFunc(out, func(a, b dashboard.Ranked) int {
		if a.Count != b.Count {
			return cmp.Compare(b.Count, a.Count)
		}
		return strings.Compare(b.Name, a.Name)
	})
	return out[:min(n, len(out))]
}

// slowest returns the slowest command Redis logged, in µs, and its name,
// and empties the log.
func slowest(t testing.TB, rdb *redis.Client) (time.Duration, string) {
	t.Helper()
	ctx := context.Background()
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var d time.Duration
	var name string
	for _, l := range logs {
		if l.Duration > d {
			d, name = l.Duration, fmt.Sprint(l.Args[0])
		}
	}
	if err := rdb.Do(ctx, "slowlog", "reset").Err(); err != nil {
		t.Fatal(err)
	}
	return d, name
}

// redisCPU is the CPU time Redis has used, user and system (INFO cpu).
// Unlike commandUsec it counts a script's commands once: commandstats
// counts them both in the script and on their own.
func redisCPU(tb testing.TB, rdb *redis.Client) time.Duration {
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

// commandUsec sums Redis' CPU time over the commands it has run since its
// statistics were last reset (INFO commandstats), but for those the
// measure itself sends.
func commandUsec(t testing.TB, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, "usec=")
		if !ok || measuring(line) {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q", line)
		}
		total += n
	}
	return total
}

// measuring reports whether a line of INFO commandstats is of a command
// the benchmark sends to measure, not to read a ranking.
func measuring(line string) bool {
	for _, c := range []string{"info", "slowlog", "keys", "unlink", "config"} {
		if strings.HasPrefix(line, "cmdstat_"+c+":") || strings.HasPrefix(line, "cmdstat_"+c+"|") {
			return true
		}
	}
	return false
}

// privateFlood starts a Redis of the test's own, logging every command
// slower than 100 µs, and fills it with fillFlood.
func privateFlood(t testing.TB) (*redis.Client, *Stats, map[dashboard.Period]map[TopKind]map[string]float64) {
	t.Helper()
	srv := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, "xcloak-test:")
	if err != nil {
		t.Fatal(err)
	}
	want := fillFlood(t, s)
	ctx := context.Background()
	for _, c := range [][]any{{"config", "set", "slowlog-log-slower-than", "100"}, {"config", "set", "slowlog-max-len", "1024"}, {"slowlog", "reset"}} {
		if err := rdb.Do(ctx, c...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return rdb, s, want
}

// TestRankingsUnderFloodBlockRedisBriefly reads the rankings of a
// distributed attack's hour and day: the hour's is exact, the day's, whose
// current hour's set overflowed, as exact as its cap allows, and Redis is sent no
// command that works on more than one capped set (no union of a period's
// sets), so none holds up the sign-ins' limit scripts for longer than
// reading one set takes. How long that is, BenchmarkRankingsUnderFlood
// measures; the slowest is only logged here, as a loaded machine stretches
// any command.
func TestRankingsUnderFloodBlockRedisBriefly(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a Redis with a day of a distributed attack")
	}
	rdb, s, want := privateFlood(t)
	commandsRun(t, rdb) // the filling's
	check := func(what string) {
		t.Helper()
		for _, c := range commandsRun(t, rdb) {
			switch {
			case c == "get", c == "set", c == "zrange":
			case c == "hello", strings.HasPrefix(c, "client"): // a connection opened
			default:
				t.Errorf("%s sent %s: want only reads of one set (zrange) and the kept copy (get, set)", what, c)
			}
		}
		if d, name := slowest(t, rdb); d > 0 {
			t.Logf("%s: the slowest command, %s, ran %v", what, name, d)
		}
	}
	for _, p := range []dashboard.Period{dashboard.Period1h, dashboard.Period24h} {
		for _, kind := range []TopKind{TopSources, TopAccounts} {
			got, err := s.Top(t.Context(), p, kind, dashboard.TopN, floodNow)
			if err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("Top(%s, %s)", p, kind))
			if p == dashboard.Period24h {
				// The current hour's set took sixty minutes' flood, far
				// past its cap: each count listed is the member's own,
				// plus at most what it inherited (rank.lua), under the
				// period's total over the cap.
				checkSpaceSaving(t, got, want[p][kind], hourRankCap)
				continue
			}
			if w := exactTop(want[p][kind], dashboard.TopN); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("Top(%s, %s) = %v\nwant %v", p, kind, got, w)
			}
		}
	}
	s.forgetRankings(t, rdb)
	snap, err := s.Snapshot(t.Context(), dashboard.Period1h, floodNow, dashboard.TopN)
	if err != nil {
		t.Fatal(err)
	}
	// The summary and the series are read in one transaction of their
	// own, small reads of the period's hashes.
	for _, c := range commandsRun(t, rdb) {
		if strings.HasPrefix(c, "zunion") || strings.HasPrefix(c, "zinter") {
			t.Errorf("Snapshot sent %s: a union of a period's sets", c)
		}
	}
	if w := exactTop(want[dashboard.Period1h][TopSources], dashboard.TopN); fmt.Sprint(snap.TopSources) != fmt.Sprint(w) {
		t.Errorf("Snapshot's top sources %v\nwant %v", snap.TopSources, w)
	}
}

// checkSpaceSaving fails unless got is a full ranking, highest first,
// whose every count is at least the member's own in counts and over it
// by at most the total of counts over capped.
func checkSpaceSaving(t *testing.T, got []dashboard.Ranked, counts map[string]float64, capped int) {
	t.Helper()
	var total float64
	for _, c := range counts {
		total += c
	}
	if len(got) != dashboard.TopN {
		t.Errorf("ranking %v: %d members, want %d", got, len(got), dashboard.TopN)
	}
	for i, r := range got {
		own := int64(counts[r.Name])
		if r.Count < own || r.Count > own+int64(total)/int64(capped) {
			t.Errorf("%s counted %d, its own %d: want at most %d over it", r.Name, r.Count, own, int64(total)/int64(capped))
		}
		if i > 0 && r.Count > got[i-1].Count {
			t.Errorf("ranking %v not highest first", got)
		}
	}
}

// commandsRun lists the commands Redis has run since its statistics were
// last reset (INFO commandstats), but for those a measure sends, and
// resets them.
func commandsRun(t testing.TB, rdb *redis.Client) []string {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(info, "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || measuring(line) {
			continue
		}
		out = append(out, name)
	}
	if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkRankingsUnderFlood reads the 1-hour and 24-hour rankings of a
// distributed attack, each time as a new minute (nothing cached), and
// reports the longest single command and Redis' CPU time per read.
//
//	go test -run '^$' -bench BenchmarkRankingsUnderFlood -benchtime=5x ./counters/
func BenchmarkRankingsUnderFlood(b *testing.B) {
	rdb, s, _ := privateFlood(b)
	for _, p := range []dashboard.Period{dashboard.Period1h, dashboard.Period24h} {
		b.Run(p.String(), func(b *testing.B) {
			ctx := context.Background()
			slowest(b, rdb)
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			var longest time.Duration
			for b.Loop() {
				// Each read as the first of its minute: past any copy
				// kept, a merge of its own.
				s.forgetRankings(b, rdb)
				slowest(b, rdb)
				if _, err := s.Top(ctx, p, TopSources, dashboard.TopN, floodNow); err != nil {
					b.Fatal(err)
				}
				if d, _ := slowest(b, rdb); d > longest {
					longest = d
				}
			}
			b.ReportMetric(float64(longest.Microseconds()), "longest-µs")
			b.ReportMetric(float64(commandUsec(b, rdb))/float64(b.N), "redis-µs/read")
		})
	}
}

// BenchmarkCountEventsIntoFullRankings counts, as the Recorder does, a
// batch of 1,000 rejections from sources new to the current minute's and
// hour's rankings, both already full: the write side of a distributed
// attack. It reports the longest single command Redis logged (a script
// whole; a transaction's commands each apart, though Redis runs the
// transaction whole), Redis' CPU time per batch and, as ns/op, the
// batch's time as the Recorder waits for it.
//
//	go test -run '^$' -bench BenchmarkCountEventsIntoFullRankings -benchtime=20x ./counters/
func BenchmarkCountEventsIntoFullRankings(b *testing.B) {
	rdb, s, _ := privateFlood(b)
	ctx := context.Background()
	slowest(b, rdb)
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

// forgetRankings deletes the rankings Stats keeps for a while, so that
// the next read computes them again.
func (s *Stats) forgetRankings(tb testing.TB, rdb *redis.Client) {
	tb.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*:top*").Result()
	if err != nil {
		tb.Fatal(err)
	}
	if len(keys) > 0 {
		if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestRankingMergedOnceForAllReplicas has replicas ask for the same
// ranking at once, as the live dashboard does every second on each: one
// merges it, the others read its copy, and all get the same.
func TestRankingMergedOnceForAllReplicas(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var replicas []*Stats
	for range 4 {
		s, err := New(rdb, "xcloak-test:")
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, s)
	}
	now := floodNow
	var batch []auth.Event
	for m := range int64(60) {
		for i := range m%5 + 1 {
			batch = append(batch, auth.Event{At: now.Add(-time.Duration(m) * time.Minute), Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP,
				Source: fmt.Sprintf("192.0.2.%d", i), Account: "a@example.com"})
		}
	}
	if err := replicas[0].CountEvents(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(replicas))
	done := make(chan struct{})
	for i, s := range replicas {
		go func() {
			defer func() { done <- struct{}{} }()
			top, err := s.Top(context.Background(), dashboard.Period1h, TopSources, dashboard.TopN, now)
			if err != nil {
				t.Error(err)
			}
			got[i] = fmt.Sprint(top)
		}()
	}
	for range replicas {
		<-done
	}
	const want = "[{192.0.2.0 60} {192.0.2.1 48} {192.0.2.2 36} {192.0.2.3 24} {192.0.2.4 12}]"
	for i, g := range got {
		if g != want {
			t.Errorf("replica %d: %s, want %s", i, g, want)
		}
	}
	info := rdb.Info(t.Context(), "commandstats").Val()
	if !strings.Contains(info, "cmdstat_zrange:calls=60,") {
		t.Errorf("the minute sets were not read once (60 ZRANGE) for all replicas:\n%s", info)
	}

	// A replica that took the lock and never came back holds the others
	// up for rankingWait, not longer, and never empties the ranking.
	later := now.Add(-time.Minute)
	name := ":top:" + string(TopSources) + ":" + strconv.Itoa(int(dashboard.Period1h)) + ":1:" + strconv.FormatInt(unixMinute(later), 10) + ":lock"
	if err := rdb.Set(t.Context(), replicas[0].keys.Key(dashboardID, name), 1, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	top, err := replicas[1].Top(t.Context(), dashboard.Period1h, TopSources, 1, later)
	if err != nil || fmt.Sprint(top) != "[{192.0.2.0 59}]" {
		t.Errorf("behind a lost lock: %v, %v; want [{192.0.2.0 59}]", top, err)
	}
	if waited := time.Since(start); waited < rankingWait || waited > rankingWait+5*time.Second {
		t.Errorf("behind a lost lock waited %v, want about %v", waited, rankingWait)
	}
}

// TestRankingKeptCopyUnreadableIsMergedAgain: a kept ranking this replica
// cannot read (one kept in another form, by a replica of another version
// during a rolling upgrade) is merged again and kept anew, not answered as
// an error, which would empty the dashboard's rankings on every replica of
// this version for as long as the other kept writing.
func TestRankingKeptCopyUnreadableIsMergedAgain(t *testing.T) {
	srv := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, "xcloak-test:")
	if err != nil {
		t.Fatal(err)
	}
	now := floodNow
	batch := []auth.Event{{At: now, Kind: auth.EventLoginRejected, Rule: auth.RuleLoginIP, Source: "192.0.2.7", Account: "a@example.com"}}
	if err := s.CountEvents(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	name := ":top:" + string(TopSources) + ":" + strconv.Itoa(int(dashboard.Period1h)) + ":1:" + strconv.FormatInt(unixMinute(now), 10)
	kept := s.keys.Key(dashboardID, name)
	if err := rdb.Set(t.Context(), kept, `{"v":2,"ranking":[]}`, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	top, err := s.Top(t.Context(), dashboard.Period1h, TopSources, 1, now)
	if err != nil || fmt.Sprint(top) != "[{192.0.2.7 1}]" {
		t.Fatalf("over an unreadable kept copy: %v, %v; want [{192.0.2.7 1}]", top, err)
	}
	if ttl := rdb.PTTL(t.Context(), kept).Val(); ttl <= 0 || ttl > rankingFresh {
		t.Errorf("the copy kept anew expires in %v, want within %v", ttl, rankingFresh)
	}
}
