package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/ratelimit"
)

const memoryDescription = `Measures the Redis memory XCloak spends per attacker address. For each
--attempts value, --ips distinct addresses (10.0.0.0 onwards) each make that
many attempts through XCloak's limiter under the sign-in rule per client
network (login_ip) at --limit, the server's default; the report gives the
growth of used_memory (INFO memory) per address and the exact MEMORY USAGE
of sampled keys. Every key is deleted afterwards.

used_memory counts everything on the server: run it against a Redis that
nothing else writes to while it runs.
`

// memoryRow is one measurement.
type memoryRow struct {
	What             string  `json:"what"`
	IPs              int     `json:"ips"`
	Attempts         int     `json:"attempts_per_ip"`
	Keys             int64   `json:"keys"`
	UsedMemoryDelta  int64   `json:"used_memory_delta_bytes"`
	BytesPerIP       float64 `json:"bytes_per_ip"`
	MemoryUsageMean  float64 `json:"memory_usage_mean_bytes,omitempty"`
	MemoryUsageCount int     `json:"memory_usage_samples,omitempty"`
	Seconds          float64 `json:"seconds"`
}

func memoryCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "memory", "[flags]", memoryDescription)
	redisURL := fs.String("redis", defaultRedisURL, "`URL` of the Redis to measure")
	ips := fs.Int("ips", 100_000, "distinct attacker addresses (`n`, at most 1000000)")
	attempts := intList{1, 50}
	fs.Var(&attempts, "attempts", "comma-separated attempts per address, one measurement each")
	limitFlag := fs.String("limit", "50/10m", "the login_ip `limit`, COUNT/WINDOW")
	workers := fs.Int("workers", 64, "requests in flight at once (`n`)")
	samples := fs.Int("samples", 1000, "keys whose MEMORY USAGE is read (`n`)")
	jsonOut := fs.Bool("json", false, "print a JSON array with one object per row instead of the table")
	base := fs.String("key-prefix", "stuffing:memory:", "start of each measurement's key `prefix`; random hex and ':' are added")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound on the whole run (at most 10m)")
	allow := fs.Bool("allow-non-loopback", false, "allow a Redis that is not on this machine's loopback")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	limit, err := ratelimit.ParseLimit(*limitFlag)
	if err != nil {
		return badFlag(stderr, "--limit: %v", err)
	}
	switch {
	case *ips < 1 || *ips > 1_000_000:
		return badFlag(stderr, "--ips %d out of range 1..1000000", *ips)
	case *workers < 1 || *workers > maxWorkers:
		return badFlag(stderr, "--workers %d out of range 1..%d", *workers, maxWorkers)
	case *samples < 0:
		return badFlag(stderr, "--samples %d is negative", *samples)
	}
	for _, a := range attempts {
		if a > 1000 {
			return badFlag(stderr, "--attempts %d above 1000", a)
		}
	}
	if err := inBounds("timeout", *timeout, time.Second, maxDuration); err != nil {
		return badFlag(stderr, "%v", err)
	}
	if _, err := newRunPrefix(*base); err != nil {
		return badFlag(stderr, "%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rdb, where, err := redisTarget{url: *redisURL, pool: *workers, allow: *allow}.connect(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	client, ok := rdb.(*redis.Client)
	if !ok {
		return fmt.Errorf("%s is not a single Redis", where)
	}

	m := memoryRun{rdb: client, base: *base, ips: *ips, workers: *workers, samples: *samples, limit: limit, progress: stderr}
	var rows []memoryRow
	for _, a := range attempts {
		row, err := m.limiterRow(ctx, a)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	if *jsonOut {
		return writeJSON(stdout, rows)
	}
	fmt.Fprintf(stdout, "Redis memory per attacker address on %s, login_ip limit %s\n\n", where, limit)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "what\taddresses\tattempts each\tkeys\tused_memory growth\tbytes per address\tMEMORY USAGE per key\t")
	for _, r := range rows {
		usage := "-"
		if r.MemoryUsageCount > 0 {
			usage = fmt.Sprintf("%.0f", r.MemoryUsageMean)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.0f\t%s\t\n", r.What, r.IPs, r.Attempts, r.Keys, r.UsedMemoryDelta, r.BytesPerIP, usage)
	}
	return tw.Flush()
}

// memoryRun holds one memory command's settings.
type memoryRun struct {
	rdb      *redis.Client
	base     string
	ips      int
	workers  int
	samples  int
	limit    ratelimit.Limit
	progress io.Writer
}

// attackerIP is address i of 10.0.0.0/8.
func attackerIP(i int) string {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
}

// limiterRow fills the login_ip rule for every address and measures.
func (m memoryRun) limiterRow(ctx context.Context, attempts int) (memoryRow, error) {
	prefix, _ := newRunPrefix(m.base)
	defer m.clean(ctx, prefix)
	l, err := ratelimit.NewLimiter(m.rdb, prefix)
	if err != nil {
		return memoryRow{}, err
	}
	before, keysBefore, err := m.usage(ctx)
	if err != nil {
		return memoryRow{}, err
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range m.workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= m.ips || ctx.Err() != nil {
					return
				}
				rule := ratelimit.Rule{Name: "login_ip", ID: attackerIP(i), Limit: m.limit}
				for range attempts {
					if _, err := l.Allow(ctx, rule); err != nil {
						once.Do(func() { firstErr = err })
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return memoryRow{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return memoryRow{}, err
	}
	took := time.Since(start)
	after, keysAfter, err := m.usage(ctx)
	if err != nil {
		return memoryRow{}, err
	}
	keys, _ := ratelimit.NewKeys(prefix, "login_ip")
	var sum int64
	n := min(m.samples, m.ips)
	for i := range n {
		u, err := m.rdb.MemoryUsage(ctx, keys.Log(attackerIP(i*m.ips/n)), 0).Result()
		if err != nil {
			return memoryRow{}, fmt.Errorf("MEMORY USAGE: %w", err)
		}
		sum += u
	}
	row := memoryRow{
		What: "limiter log (login_ip)", IPs: m.ips, Attempts: attempts, Keys: keysAfter - keysBefore,
		UsedMemoryDelta: after - before, BytesPerIP: float64(after-before) / float64(m.ips), Seconds: took.Seconds(),
	}
	if n > 0 {
		row.MemoryUsageMean, row.MemoryUsageCount = float64(sum)/float64(n), n
	}
	fmt.Fprintf(m.progress, "%d addresses x %d attempts: %d bytes of used_memory in %.1fs\n", m.ips, attempts, row.UsedMemoryDelta, took.Seconds())
	return row, nil
}

// usage reads used_memory and the number of keys.
func (m memoryRun) usage(ctx context.Context) (used, keys int64, err error) {
	info, err := m.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			used, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("INFO memory: used_memory %q: %w", v, err)
			}
		}
	}
	keys, err = m.rdb.DBSize(ctx).Result()
	return used, keys, err
}

func (m memoryRun) clean(ctx context.Context, prefix string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := deletePrefixed(ctx, m.rdb, prefix); err != nil {
		fmt.Fprintf(m.progress, "deleting %s*: %v\n", prefix, err)
	}
}
