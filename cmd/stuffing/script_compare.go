package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/ratelimit"
)

const scriptCompareDescription = `Measures what versions of the limiter's script (ratelimit/sliding_window.lua)
cost Redis, interleaved: every round runs each contender once for
--duration, in an order shuffled with --seed, and the report gives for each
the medians over rounds of its decisions per second, of the script's own
time per call inside Redis (usec_per_call of EVALSHA in INFO commandstats)
and of Redis' CPU per decision (used_cpu_user and used_cpu_sys of INFO
cpu), and beside the first script, the median of the per-round ratios.
Inside Redis a script's cost is steadier than a rate on a shared machine:
it leaves out the network, the client and the operating system's wake-ups.

Each --script NAME=FILE is run in two shapes, as the Limiter calls it:
  NAME/allow   one rule at --limit: one log
  NAME/signin  an IPv4 sign-in's four rules: the address' and its /24's
               logs, the account's (lockable: its log and its lock) at
               --limit, and the password's lock alone: five keys

Compare a change with what it replaces:

  git show main:ratelimit/sliding_window.lua > /tmp/before.lua
  stuffing script-compare --script before=/tmp/before.lua --script after=ratelimit/sliding_window.lua

Before each run Redis' statistics are reset (CONFIG RESETSTAT): use a Redis
whose statistics nobody else reads. The calls cycle over --keys identities
of each contender's own; with many every decision admits, with 1 all but
the first --limit reject. The keys live under a run prefix in the Redis of
--redis and are deleted at the end.
`

// scriptFlag is a repeated --script NAME=FILE: the scripts, in order.
type scriptFlag []namedScript

type namedScript struct {
	name, file, src string
}

func (f *scriptFlag) String() string {
	s := make([]string, len(*f))
	for i, n := range *f {
		s[i] = n.name + "=" + n.file
	}
	return strings.Join(s, ",")
}

func (f *scriptFlag) Set(v string) error {
	name, file, ok := strings.Cut(v, "=")
	if !ok || file == "" {
		return errors.New("want NAME=FILE")
	}
	if len(name) == 0 || len(name) > 32 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return fmt.Errorf("name %q: want 1 to 32 of a-z, 0-9, _ and -", name)
	}
	for _, n := range *f {
		if n.name == name {
			return fmt.Errorf("name %q given twice", name)
		}
	}
	src, err := readScript(file)
	if err != nil {
		return err
	}
	*f = append(*f, namedScript{name: name, file: file, src: src})
	return nil
}

// maxScriptBytes bounds a script file: sliding_window.lua is some 14 KB,
// and a path such as /dev/zero must not be read without end.
const maxScriptBytes = 1 << 20

func readScript(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxScriptBytes+1))
	if err != nil {
		return "", err
	}
	if len(src) > maxScriptBytes {
		return "", fmt.Errorf("%s: larger than %d bytes", file, maxScriptBytes)
	}
	return string(src), nil
}

// scriptContender is one script in one shape, and what each round
// measured of it.
type scriptContender struct {
	Name   string `json:"name"`
	Script string `json:"script"`
	Shape  string `json:"shape"`
	// Per round, in the order of the rounds.
	Rates        []float64 `json:"decisions_per_second"`
	ScriptMicros []float64 `json:"script_us_per_call"`
	CPUMicros    []float64 `json:"redis_cpu_us_per_decision"`
	// Medians over the rounds.
	MedianRate         float64 `json:"median_decisions_per_second"`
	MedianScriptMicros float64 `json:"median_script_us_per_call"`
	MedianCPUMicros    float64 `json:"median_redis_cpu_us_per_decision"`
	// Beside the first script in the same shape, medians of the
	// per-round ratios (this one's over the first's); 1 for the first.
	RateVsFirst   float64 `json:"median_rate_vs_first"`
	ScriptVsFirst float64 `json:"median_script_us_vs_first"`

	sha  string
	keys func(id string) []string
	args string
	next atomic.Int64
}

// scriptCompareReport is what "stuffing script-compare" prints.
type scriptCompareReport struct {
	Redis      string             `json:"redis"`
	Seed       uint64             `json:"seed"`
	Rounds     int                `json:"rounds"`
	Duration   string             `json:"duration_per_run"`
	Clients    int                `json:"clients"`
	Keys       int                `json:"keys"`
	Limit      string             `json:"limit"`
	CPUs       int                `json:"cpus"`
	LoadBefore string             `json:"load_average_before"`
	LoadAfter  string             `json:"load_average_after"`
	Orders     [][]string         `json:"orders"`
	Contenders []*scriptContender `json:"contenders"`
}

func scriptCompareCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "script-compare", "--script NAME=FILE [--script NAME=FILE ...] [flags]", scriptCompareDescription)
	var scripts scriptFlag
	fs.Var(&scripts, "script", "`NAME=FILE`: a version of sliding_window.lua to measure; repeat it, the first is the one the others are compared with")
	f := addRedisCompareFlags(fs, 7, 1500*time.Millisecond, "stuffing:scripts:", "rounds, each running every contender once")
	clients := fs.Int("clients", 64, "callers at once (`n`)")
	keys := fs.Int("keys", 100_000, "identities each contender's calls cycle over (`n`)")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if len(scripts) == 0 {
		return badFlag(stderr, "want at least one --script NAME=FILE")
	}
	if err := f.check(stderr); err != nil {
		return err
	}
	switch {
	case *clients < 1 || *clients > maxWorkers:
		return badFlag(stderr, "--clients %d out of range 1..%d", *clients, maxWorkers)
	case *keys < 1 || *keys > 1_000_000:
		return badFlag(stderr, "--keys %d out of range 1..1000000", *keys)
	}
	rdb, where, prefix, err := f.start(ctx, stderr, 2**clients)
	if err != nil {
		return err
	}
	defer rdb.Close()
	progress := f.progress(stdout, stderr)

	rep := scriptCompareReport{Redis: where, Seed: f.seed, Rounds: f.rounds, Duration: f.duration.String(), Clients: *clients,
		Keys: *keys, Limit: ratelimit.PerMinute(f.limit).String(), CPUs: runtime.NumCPU(), LoadBefore: loadAverage()}
	runErr := rep.run(ctx, rdb, scripts, prefix, f.limit, f.duration, mathrand.New(mathrand.NewPCG(f.seed, 0)), progress)
	rep.LoadAfter = loadAverage()
	return f.finish(ctx, rdb, stdout, runErr, rep, rep.print, prefix)
}

// packedRules is ARGV[1] of sliding_window.lua: each rule's limit
// (negated for a lockable rule, 0 for a lock-only one) and window in
// microseconds (0 for a lock-only rule), little-endian, 12 bytes a rule.
func packedRules(rules ...[2]int64) string {
	b := make([]byte, 0, 12*len(rules))
	for _, r := range rules {
		b = binary.LittleEndian.AppendUint32(b, uint32(int32(r[0])))
		b = binary.LittleEndian.AppendUint64(b, uint64(r[1]))
	}
	return string(b)
}

// run loads the scripts, makes their contenders and measures them round
// by round.
func (rep *scriptCompareReport) run(ctx context.Context, rdb redis.UniversalClient, scripts []namedScript, prefix string,
	limit int, d time.Duration, rng *mathrand.Rand, progress io.Writer) error {
	window := time.Minute.Microseconds()
	n := int64(limit)
	allowArgs := packedRules([2]int64{n, window})
	signInArgs := packedRules([2]int64{n, window}, [2]int64{n, window}, [2]int64{-n, window}, [2]int64{0, 0})
	for _, s := range scripts {
		sha, err := rdb.ScriptLoad(ctx, s.src).Result()
		if err != nil {
			return fmt.Errorf("%s: %w", s.file, err)
		}
		keys := func(shape string, kinds ...string) (func(string) []string, error) {
			ks := make([]ratelimit.Keys, len(kinds))
			for i, kind := range kinds {
				k, err := ratelimit.NewKeys(prefix+s.name+":"+shape+":", strings.TrimSuffix(kind, ":lock"))
				if err != nil {
					return nil, err
				}
				ks[i] = k
			}
			return func(id string) []string {
				out := make([]string, len(kinds))
				for i, kind := range kinds {
					suffix := ""
					if strings.HasSuffix(kind, ":lock") {
						suffix = ":lock"
					}
					out[i] = ks[i].Key(id, suffix)
				}
				return out
			}, nil
		}
		allowKeys, err := keys("allow", "compare_allow")
		if err != nil {
			return err
		}
		signInKeys, err := keys("signin", "login_ip", "login_network", "login_account", "login_account:lock", "login_password:lock")
		if err != nil {
			return err
		}
		rep.Contenders = append(rep.Contenders,
			&scriptContender{Name: s.name + "/allow", Script: s.file, Shape: "allow", sha: sha, keys: allowKeys, args: allowArgs},
			&scriptContender{Name: s.name + "/signin", Script: s.file, Shape: "signin", sha: sha, keys: signInKeys, args: signInArgs})
	}
	ids := make([]string, rep.Keys)
	for i := range ids {
		ids[i] = "id" + strconv.Itoa(i)
	}
	// A first short run of each opens the connections.
	for _, c := range rep.Contenders {
		if _, err := c.measure(ctx, rdb, rep.Clients, min(d, 200*time.Millisecond), ids); err != nil {
			return err
		}
	}
	first := map[string]*scriptContender{}
	for _, c := range rep.Contenders {
		if first[c.Shape] == nil {
			first[c.Shape] = c
		}
	}
	var rateRatios, scriptRatios [][]float64
	for range rep.Contenders {
		rateRatios, scriptRatios = append(rateRatios, nil), append(scriptRatios, nil)
	}
	for r := range rep.Rounds {
		order := make([]*scriptContender, len(rep.Contenders))
		copy(order, rep.Contenders)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		names := make([]string, len(order))
		for i, c := range order {
			names[i] = c.Name
			m, err := c.measure(ctx, rdb, rep.Clients, d, ids)
			if err != nil {
				return err
			}
			c.Rates = append(c.Rates, m.rate)
			c.ScriptMicros = append(c.ScriptMicros, m.scriptMicros)
			c.CPUMicros = append(c.CPUMicros, m.cpuMicros)
		}
		rep.Orders = append(rep.Orders, names)
		for i, c := range rep.Contenders {
			f := first[c.Shape]
			rateRatios[i] = append(rateRatios[i], c.Rates[r]/f.Rates[r])
			scriptRatios[i] = append(scriptRatios[i], c.ScriptMicros[r]/f.ScriptMicros[r])
		}
		fmt.Fprintf(progress, "round %d/%d done\n", r+1, rep.Rounds)
	}
	for i, c := range rep.Contenders {
		c.MedianRate, c.MedianScriptMicros, c.MedianCPUMicros = median(c.Rates), median(c.ScriptMicros), median(c.CPUMicros)
		c.RateVsFirst, c.ScriptVsFirst = median(rateRatios[i]), median(scriptRatios[i])
	}
	return nil
}

// scriptRun is what one run of a contender measured.
type scriptRun struct {
	rate, scriptMicros, cpuMicros float64
}

// measure runs c with clients callers for d, after resetting Redis'
// statistics, and reads them.
func (c *scriptContender) measure(ctx context.Context, rdb redis.UniversalClient, clients int, d time.Duration, ids []string) (scriptRun, error) {
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return scriptRun{}, err
	}
	cpuBefore, err := redisCPU(ctx, rdb)
	if err != nil {
		return scriptRun{}, err
	}
	calls, rate, err := callFor(ctx, clients, d, func() error {
		return rdb.EvalSha(ctx, c.sha, c.keys(ids[int(c.next.Add(1)-1)%len(ids)]), c.args).Err()
	})
	if err != nil {
		return scriptRun{}, fmt.Errorf("%s: %w", c.Name, err)
	}
	cpuAfter, err := redisCPU(ctx, rdb)
	if err != nil {
		return scriptRun{}, err
	}
	perCall, err := evalSHAMicros(ctx, rdb)
	if err != nil {
		return scriptRun{}, err
	}
	return scriptRun{rate: rate, scriptMicros: perCall, cpuMicros: (cpuAfter - cpuBefore) * 1e6 / float64(max(calls, 1))}, nil
}

// redisCPU is the seconds of CPU the Redis process has used, user and
// system.
func redisCPU(ctx context.Context, rdb redis.UniversalClient) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	found := 0
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu: %s: %w", k, err)
			}
			total += f
			found++
		}
	}
	if found != 2 {
		return 0, errors.New("INFO cpu: no used_cpu_user and used_cpu_sys")
	}
	return total, nil
}

// evalSHAMicros is usec_per_call of EVALSHA from INFO commandstats.
func evalSHAMicros(ctx context.Context, rdb redis.UniversalClient) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		stats, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(stats, ",") {
			if v, ok := strings.CutPrefix(field, "usec_per_call="); ok {
				return strconv.ParseFloat(v, 64)
			}
		}
	}
	return 0, errors.New("INFO commandstats: no usec_per_call of evalsha")
}

func (rep *scriptCompareReport) print(w io.Writer, prefix string) {
	fmt.Fprintf(w, "Redis        %s, limit %s, %s over %s\n", rep.Redis, rep.Limit, plural(rep.Clients, "client"), plural(rep.Keys, "key"))
	fmt.Fprintf(w, "rounds       %d of %s per contender, order shuffled with --seed %d\n", rep.Rounds, rep.Duration, rep.Seed)
	fmt.Fprintf(w, "load average %s before, %s after (%d CPUs)\n\n", rep.LoadBefore, rep.LoadAfter, rep.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "medians\tdecisions/s\tscript µs/call\tRedis CPU µs/decision\tscript µs vs first\trate vs first\t")
	for _, c := range rep.Contenders {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.3fx\t%.3fx\t\n", c.Name, thousands(c.MedianRate), c.MedianScriptMicros,
			c.MedianCPUMicros, c.ScriptVsFirst, c.RateVsFirst)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "keys under %s deleted\n", prefix)
}
