package attack

import (
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/redisonce"
)

// The watch's keys, all of the one identity watchID under the "attack"
// kind, so that they share one hash tag (one Redis Cluster slot):
//
//	:s:<unix second>  hash of Counts, for the window (secondRetention)
//	:m:<unix minute>  hash of Counts, for the long window and the panel
//	                  (countRetention)
//	:b:<unix minute>  hash of Counts outside attack mode, for the baseline
//	                  (baselineRetention)
//	:a:<unix minute>  HyperLogLog of the accounts tried
//	:n:<unix minute>  HyperLogLog of the networks (IPv4 /24, IPv6 /48)
//	:t:<unix minute>  sorted set of networks by attempts that did not
//	                  succeed, capped at rankCap
//	:f:<replica>      the number of the newest of a replica's batches
//	                  that Redis applied (flush.lua; baselineRetention)
//	:state            attack mode (state.lua)

//go:embed state.lua
var stateLua string

//go:embed flush.lua
var flushLua string

// script is a Lua script sent as an internal/redisonce command, which
// go-redis never sends twice: by EVALSHA, and by EVAL where Redis
// answered NOSCRIPT (a restart or a failover).
type script struct{ src, sha string }

func newScript(src string) script { return script{src: src, sha: redis.NewScript(src).Hash()} }

// cmd is the script's command with keys and args, by EVAL if eval.
func (s script) cmd(ctx context.Context, eval bool, keys []string, args ...any) redisonce.Cmd {
	if eval {
		return redisonce.Eval(ctx, s.src, keys, args...)
	}
	return redisonce.EvalSha(ctx, s.sha, keys, args...)
}

var (
	// stateScript enters and leaves attack mode (state.lua).
	stateScript = newScript(stateLua)
	// flushScript adds the batches of a flush, each once (flush.lua).
	flushScript = newScript(flushLua)
)

func (w *Watch) key(suffix string, n int64) string {
	return w.keys.Key(watchID, ":"+suffix+":"+strconv.FormatInt(n, 10))
}

func (w *Watch) stateKey() string { return w.keys.Key(watchID, ":state") }

// numbered is a batch as a flush sent it, under its number.
type numbered struct {
	n int64
	b batch
}

// flush writes the batches of sent, oldest first, and reads the windows
// ending at now's second and at the settledWindows-1 seconds before it
// (windows, the newest first), the long window ending at now and, when
// readBaseline, the sum of the baseline's minutes, all in one pipeline.
// The long window is the current minute's counts and those of the
// minutes before it, as the Detector counts it. written reports that
// Redis has applied every batch of sent, by this flush or an earlier
// one, even if a read failed.
func (w *Watch) flush(ctx context.Context, sent []numbered, now time.Time, readBaseline bool) (windows []Counts, long, baseSum Counts, written bool, err error) {
	wr := w.writes(sent)
	var write redisonce.Cmd
	var windowCmds, longCmds, baseCmds []*redis.MapStringStringCmd
	var adds []redis.Cmder
	send := func(eval bool) error {
		pipe := w.rdb.Pipeline()
		if wr != nil {
			write = flushScript.cmd(ctx, eval, wr.keys, wr.args...)
			_ = pipe.Process(ctx, write)
			adds = queueDistinct(ctx, pipe, wr)
		}
		windowCmds, longCmds, baseCmds = w.queueReads(ctx, pipe, now, readBaseline)
		_, err := pipe.Exec(ctx)
		return err
	}
	err = send(false)
	if wr != nil && redis.HasErrorPrefix(write.Err(), "NOSCRIPT") {
		err = send(true)
	}
	// The batches are written once the script and every PFADD are: a
	// flush sent again adds nothing twice (flush.lua skips what it
	// applied, and a PFADD adds a member once).
	written = wr == nil || (write.Err() == nil && !slices.ContainsFunc(adds, func(c redis.Cmder) bool { return c.Err() != nil }))
	if err != nil {
		return nil, Counts{}, Counts{}, written, fmt.Errorf("attack counts: %w", err)
	}
	secs := int(w.cfg.Window / time.Second)
	windows = make([]Counts, settledWindows)
	for i := range windows {
		// windowCmds are oldest first; the window ending i seconds
		// before now's is the secs of them before the last i.
		if windows[i], err = sumCounts(windowCmds[len(windowCmds)-i-secs : len(windowCmds)-i]); err != nil {
			return nil, Counts{}, Counts{}, written, err
		}
	}
	if long, err = sumCounts(longCmds); err != nil {
		return nil, Counts{}, Counts{}, written, err
	}
	if baseSum, err = sumCounts(baseCmds); err != nil {
		return nil, Counts{}, Counts{}, written, err
	}
	return windows, long, baseSum, written, nil
}

// settledWindows is how many windows a Tick reads from Redis: the one
// ending at its own second, and those ending at each of the seconds
// before it up to the newest that every replica has flushed whole. A
// replica ticks about once a second, each at its own moment of the
// second: as one reads, another has yet to flush what it counted since
// its last tick, in the last second and the current one. The window
// ending at the tick's second alone would never hold the sum of all
// replicas' seconds, and an attack spread over them at the thresholds'
// pace would not trip it; the one ending two seconds before does, a
// second or two later.
const settledWindows = 3

// queueReads queues the reads of flush in pipe.
func (w *Watch) queueReads(ctx context.Context, pipe redis.Pipeliner, now time.Time, readBaseline bool) (window, long, base []*redis.MapStringStringCmd) {
	secs := int64(w.cfg.Window/time.Second) + settledWindows - 1
	window = make([]*redis.MapStringStringCmd, 0, secs)
	for s := now.Unix() - secs + 1; s <= now.Unix(); s++ {
		window = append(window, pipe.HGetAll(ctx, w.key("s", s)))
	}
	cur := now.Unix() / 60
	if n := int64(w.cfg.LongWindow / time.Minute); n > 0 {
		for m := cur - n + 1; m <= cur; m++ {
			long = append(long, pipe.HGetAll(ctx, w.key("m", m)))
		}
	}
	if readBaseline {
		for m := cur - baselineMinutes; m < cur; m++ {
			base = append(base, pipe.HGetAll(ctx, w.key("b", m)))
		}
	}
	return window, long, base
}

// writes are flush.lua's keys and arguments.
type writes struct {
	keys  []string
	index map[string]int // in keys, from 1 as Lua counts
	args  []any
	// distinct are added apart from the script (queueDistinct).
	distinct []distinct
}

// writes returns the writes of the batches of sent; nil if there are
// none.
func (w *Watch) writes(sent []numbered) *writes {
	if len(sent) == 0 {
		return nil
	}
	wr := &writes{keys: []string{w.flushedKey}, index: map[string]int{},
		args: []any{baselineRetention.Milliseconds(), sent[len(sent)-1].n}}
	for _, s := range sent {
		wr.args = append(wr.args, s.n, 0)
		at := len(wr.args) - 1
		w.write(wr, &s.b)
		wr.args[at] = len(wr.args) - at - 1
	}
	return wr
}

// write adds b's writes to wr.
func (w *Watch) write(wr *writes, b *batch) {
	for sec, c := range b.seconds {
		wr.counts(w.key("s", sec), *c, secondRetention)
	}
	for min, m := range b.minutes {
		wr.counts(w.key("m", min), m.all, countRetention)
		if m.ordinary.Attempts > 0 {
			wr.counts(w.key("b", min), m.ordinary, baselineRetention)
		}
		if len(m.accounts) > 0 {
			members := make([]any, 0, len(m.accounts))
			for a := range m.accounts {
				members = append(members, accountMember(a))
			}
			wr.distinct = append(wr.distinct, distinct{w.key("a", min), members})
		}
		if len(m.networks) > 0 {
			members := make([]any, 0, len(m.networks))
			for n := range m.networks {
				members = append(members, networkName(n))
			}
			wr.distinct = append(wr.distinct, distinct{w.key("n", min), members})
		}
		if len(m.failing) > 0 {
			k := wr.key(w.key("t", min))
			for _, r := range heaviest(m.failing, rankCap) {
				wr.args = append(wr.args, "s", k, rankCap, networkName(r.network), r.count)
			}
			wr.args = append(wr.args, "e", k, minuteRetention.Milliseconds())
		}
	}
}

// distinct are the members a flush adds to one HyperLogLog.
type distinct struct {
	key     string
	members []any
}

// pfaddSize is how many members one PFADD of a flush adds: Redis answers
// other clients between two, as it does not within one script.
const pfaddSize = 1000

// queueDistinct queues in pipe the PFADDs that add wr's distinct members,
// each key's followed by its expiry.
func queueDistinct(ctx context.Context, pipe redis.Pipeliner, wr *writes) []redis.Cmder {
	var cmds []redis.Cmder
	for _, d := range wr.distinct {
		for part := range slices.Chunk(d.members, pfaddSize) {
			cmds = append(cmds, pipe.PFAdd(ctx, d.key, part...))
		}
		cmds = append(cmds, pipe.PExpire(ctx, d.key, minuteRetention))
	}
	return cmds
}

// accountMember is what the HyperLogLog of accounts is given for an
// account: 8 bytes of its SHA-256, as distinct as the address for a
// count, rather than up to 254 bytes of it for every replica to send.
func accountMember(account string) string {
	sum := sha256.Sum256([]byte(account))
	return string(sum[:8])
}

// ranked is a network and its failures in a batch.
type ranked struct {
	network netip.Prefix
	count   int64
}

// heaviest returns the at most n networks of failing with the most
// failures: a ranking of n keeps no more, and a flood from many
// networks must not have one script rank them all.
func heaviest(failing map[netip.Prefix]int64, n int) []ranked {
	all := make([]ranked, 0, len(failing))
	for p, c := range failing {
		all = append(all, ranked{p, c})
	}
	if len(all) > n {
		slices.SortFunc(all, func(a, b ranked) int { return cmp.Compare(b.count, a.count) })
		all = all[:n]
	}
	return all
}

// key returns the index of k in wr.keys, adding it if needed.
func (wr *writes) key(k string) int {
	i, ok := wr.index[k]
	if !ok {
		wr.keys = append(wr.keys, k)
		i = len(wr.keys)
		wr.index[k] = i
	}
	return i
}

// counts adds c to the counts hash key, which expires after ttl.
func (wr *writes) counts(key string, c Counts, ttl time.Duration) {
	k := wr.key(key)
	for _, f := range countFields {
		if n := *f.of(&c); n != 0 {
			wr.args = append(wr.args, "h", k, f.name, n)
		}
	}
	wr.args = append(wr.args, "e", k, ttl.Milliseconds())
}

// The fields of a counts hash.
var countFields = []struct {
	name string
	of   func(*Counts) *int64
}{
	{"attempts", func(c *Counts) *int64 { return &c.Attempts }},
	{"failures", func(c *Counts) *int64 { return &c.Failures }},
	{"unknown", func(c *Counts) *int64 { return &c.Unknown }},
	{"rejected", func(c *Counts) *int64 { return &c.Rejected }},
	{"held", func(c *Counts) *int64 { return &c.Held }},
	{"successes", func(c *Counts) *int64 { return &c.Successes }},
	{"steps", func(c *Counts) *int64 { return &c.Steps }},
}

func sumCounts(cmds []*redis.MapStringStringCmd) (Counts, error) {
	var sum Counts
	for _, c := range cmds {
		h := c.Val()
		for _, f := range countFields {
			v, ok := h[f.name]
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return Counts{}, fmt.Errorf("attack counter %s in %s is %q, not a number", f.name, c.Args()[1], v)
			}
			*f.of(&sum) += n
		}
	}
	return sum, nil
}

// stateResult is what state.lua returns.
type stateResult struct {
	change string
	state  state
	// ended is the attack the latest end ended: its since, trigger and
	// by. A call told of its end after another started attack mode
	// again records that attack's end, not the new one's.
	ended state
}

// runState runs state.lua's op; known is the state as this replica last
// read it, which the script puts back if Redis lost it. token names the
// call: one sent again under the same token after its answer was lost
// is told the change the first made.
func (w *Watch) runState(ctx context.Context, op string, now time.Time, by string, known state, token string) (stateResult, error) {
	keys := []string{w.stateKey()}
	active := "0"
	if known.active {
		active = "1"
	}
	args := []any{op, now.UnixMilli(), w.cfg.Quiet.Milliseconds(), by, stateRetention.Milliseconds(),
		active, unixMilli(known.since), known.trigger, known.by, unixMilli(known.lastHit), unixMilli(known.suppressUntil), token}
	cmd := stateScript.cmd(ctx, false, keys, args...)
	if err := w.rdb.Process(ctx, cmd); redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = stateScript.cmd(ctx, true, keys, args...)
		_ = w.rdb.Process(ctx, cmd)
	}
	v, err := cmd.StringSlice()
	if err != nil {
		return stateResult{}, fmt.Errorf("attack mode state: %w", err)
	}
	if len(v) != 10 {
		return stateResult{}, fmt.Errorf("attack mode state: %d values, want 10", len(v))
	}
	since, err1 := strconv.ParseInt(v[2], 10, 64)
	suppress, err2 := strconv.ParseInt(v[5], 10, 64)
	lastHit, err3 := strconv.ParseInt(v[6], 10, 64)
	endSince, err4 := strconv.ParseInt(v[7], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return stateResult{}, fmt.Errorf("attack mode state: %w", err)
	}
	res := stateResult{change: v[0], state: state{
		active: v[1] == "1", since: time.UnixMilli(since).UTC(), trigger: v[3], by: v[4], suppressUntil: time.UnixMilli(suppress),
		lastHit: time.UnixMilli(lastHit),
	}}
	if endSince != 0 {
		res.ended = state{since: time.UnixMilli(endSince).UTC(), trigger: v[8], by: v[9]}
	}
	return res, nil
}

// unixMilli is t in unix ms as state.lua keeps times, 0 for the zero time.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// AttackStatus returns attack mode and the panel's figures as of now, from
// Redis, as every replica sees them.
func (w *Watch) AttackStatus(ctx context.Context, now time.Time) (dashboard.Attack, error) {
	cur := now.Unix() / 60
	first := cur - int64(dashboard.AttackPeriod/time.Minute) + 1
	var counts []*redis.MapStringStringCmd
	var accounts, networks, top []string
	for m := first; m <= cur; m++ {
		accounts = append(accounts, w.key("a", m))
		networks = append(networks, w.key("n", m))
		top = append(top, w.key("t", m))
	}
	var st *redis.SliceCmd
	var nAccounts, nNetworks *redis.IntCmd
	var ranked *redis.ZSliceCmd
	scratch := w.keys.Key(watchID, ":scratch")
	_, err := w.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		st = pipe.HMGet(ctx, w.stateKey(), "active", "since", "trigger", "by")
		for m := first; m <= cur; m++ {
			counts = append(counts, pipe.HGetAll(ctx, w.key("m", m)))
		}
		nAccounts = pipe.PFCount(ctx, accounts...)
		nNetworks = pipe.PFCount(ctx, networks...)
		pipe.ZUnionStore(ctx, scratch, &redis.ZStore{Keys: top})
		ranked = pipe.ZRevRangeWithScores(ctx, scratch, 0, topNetworks-1)
		pipe.Del(ctx, scratch)
		return nil
	})
	if err != nil {
		return dashboard.Attack{}, fmt.Errorf("reading attack figures: %w", err)
	}
	sum, err := sumCounts(counts)
	if err != nil {
		return dashboard.Attack{}, err
	}
	a := dashboard.Attack{
		Attempts: sum.Attempts, Failures: sum.Failures, UnknownAccounts: sum.Unknown, Rejected: sum.Rejected, Held: sum.Held,
		DistinctAccounts: nAccounts.Val(), DistinctNetworks: nNetworks.Val(),
	}
	if v := st.Val(); len(v) == 4 && v[0] == "1" {
		a.Active = true
		if ms, err := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64); err == nil {
			a.Since = time.UnixMilli(ms).UTC()
		}
		a.Trigger, a.By = fmt.Sprint(v[2]), fmt.Sprint(v[3])
	}
	for _, z := range ranked.Val() {
		a.TopNetworks = append(a.TopNetworks, dashboard.Ranked{Name: fmt.Sprint(z.Member), Count: int64(z.Score)})
	}
	return a, nil
}
