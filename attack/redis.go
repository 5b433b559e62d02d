package attack

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/dashboard"
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
//	:state            attack mode (state.lua)

//go:embed state.lua
var stateLua string

// stateScript enters and leaves attack mode (state.lua).
var stateScript = redis.NewScript(stateLua)

func (w *Watch) key(suffix string, n int64) string {
	return w.keys.Key(watchID, ":"+suffix+":"+strconv.FormatInt(n, 10))
}

func (w *Watch) stateKey() string { return w.keys.Key(watchID, ":state") }

// flush writes b and reads the window and the long window ending at now
// and, when readBaseline, the sum of the baseline's minutes, all in one
// pipeline. The long window is the current minute's counts and those of
// the minutes before it, as the Detector counts it.
func (w *Watch) flush(ctx context.Context, b batch, now time.Time, readBaseline bool) (window, long, baseSum Counts, err error) {
	pipe := w.rdb.Pipeline()
	for sec, c := range b.seconds {
		k := w.key("s", sec)
		incrCounts(ctx, pipe, k, *c)
		pipe.Expire(ctx, k, secondRetention)
	}
	for min, m := range b.minutes {
		k := w.key("m", min)
		incrCounts(ctx, pipe, k, m.all)
		pipe.Expire(ctx, k, countRetention)
		if m.ordinary.Attempts > 0 {
			k := w.key("b", min)
			incrCounts(ctx, pipe, k, m.ordinary)
			pipe.Expire(ctx, k, baselineRetention)
		}
		if len(m.accounts) > 0 {
			members := make([]any, 0, len(m.accounts))
			for a := range m.accounts {
				members = append(members, a)
			}
			k := w.key("a", min)
			pipe.PFAdd(ctx, k, members...)
			pipe.Expire(ctx, k, minuteRetention)
		}
		if len(m.networks) > 0 {
			members := make([]any, 0, len(m.networks))
			for n := range m.networks {
				members = append(members, networkName(n))
			}
			k := w.key("n", min)
			pipe.PFAdd(ctx, k, members...)
			pipe.Expire(ctx, k, minuteRetention)
		}
		if len(m.failing) > 0 {
			k := w.key("t", min)
			for n, c := range m.failing {
				pipe.ZIncrBy(ctx, k, float64(c), networkName(n))
			}
			pipe.ZRemRangeByRank(ctx, k, 0, -(rankCap + 1))
			pipe.Expire(ctx, k, minuteRetention)
		}
	}
	secs := int64(w.cfg.Window / time.Second)
	windowCmds := make([]*redis.MapStringStringCmd, 0, secs)
	for s := now.Unix() - secs + 1; s <= now.Unix(); s++ {
		windowCmds = append(windowCmds, pipe.HGetAll(ctx, w.key("s", s)))
	}
	var longCmds []*redis.MapStringStringCmd
	if n := int64(w.cfg.LongWindow / time.Minute); n > 0 {
		cur := now.Unix() / 60
		for m := cur - n + 1; m <= cur; m++ {
			longCmds = append(longCmds, pipe.HGetAll(ctx, w.key("m", m)))
		}
	}
	var baseCmds []*redis.MapStringStringCmd
	if readBaseline {
		cur := now.Unix() / 60
		for m := cur - baselineMinutes; m < cur; m++ {
			baseCmds = append(baseCmds, pipe.HGetAll(ctx, w.key("b", m)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Counts{}, Counts{}, Counts{}, fmt.Errorf("attack counts: %w", err)
	}
	if window, err = sumCounts(windowCmds); err != nil {
		return Counts{}, Counts{}, Counts{}, err
	}
	if long, err = sumCounts(longCmds); err != nil {
		return Counts{}, Counts{}, Counts{}, err
	}
	if baseSum, err = sumCounts(baseCmds); err != nil {
		return Counts{}, Counts{}, Counts{}, err
	}
	return window, long, baseSum, nil
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
}

func incrCounts(ctx context.Context, pipe redis.Pipeliner, key string, c Counts) {
	for _, f := range countFields {
		if n := *f.of(&c); n != 0 {
			pipe.HIncrBy(ctx, key, f.name, n)
		}
	}
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
}

func (w *Watch) runState(ctx context.Context, op string, now time.Time, by string) (stateResult, error) {
	v, err := stateScript.Run(ctx, w.rdb, []string{w.stateKey()}, op, now.UnixMilli(), w.cfg.Quiet.Milliseconds(), by,
		stateRetention.Milliseconds()).StringSlice()
	if err != nil {
		return stateResult{}, fmt.Errorf("attack mode state: %w", err)
	}
	if len(v) != 6 {
		return stateResult{}, fmt.Errorf("attack mode state: %d values, want 6", len(v))
	}
	since, err1 := strconv.ParseInt(v[2], 10, 64)
	suppress, err2 := strconv.ParseInt(v[5], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return stateResult{}, fmt.Errorf("attack mode state: %w", err)
	}
	return stateResult{change: v[0], state: state{
		active: v[1] == "1", since: time.UnixMilli(since).UTC(), trigger: v[3], by: v[4], suppressUntil: time.UnixMilli(suppress),
	}}, nil
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
