package ratelimit

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
)

// TestLogExpiryUnderMixedCalls drives sliding_window.lua and take_back.lua
// directly with calls no single test writes: keys named by rules of other
// windows (and widths) from one call to the next and within one call,
// logs planted with entries ahead of Redis' clock (a clock that stepped
// back), with or without a recorded expiry, logs over 1 KB (appended to),
// take-backs of any admission. After every call, every log that exists has an expiry, its header
// records exactly that expiry, a key just written outlives its newest
// entry's window, and a rejection changed nothing.
func TestLogExpiryUnderMixedCalls(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { mixedCalls(t, rand.New(rand.NewPCG(seed, 2))) })
	}
}

// mixedCalls is one run of TestLogExpiryUnderMixedCalls; it logs how
// often an admission moved the key's expiry, kept it, or appended, so that
// a change that stops reaching a path shows.
func mixedCalls(t *testing.T, rng *rand.Rand) {
	rdb, prefix := testenv.Redis(t)
	ctx := t.Context()
	keys := []string{prefix + "{a}:log3", prefix + "{b}:log3", prefix + "{c}:log3"}
	windows := []time.Duration{time.Millisecond, 3 * time.Millisecond, 20 * time.Millisecond,
		time.Second, time.Hour, 40 * time.Minute, 7 * 24 * time.Hour, MaxWindow}
	var admitted []struct {
		key string
		at  int64
	}
	nowMicros := func() int64 {
		tm, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMicro()
	}
	type state struct {
		val string
		exp int64
	}
	snapshot := func() map[string]state {
		out := map[string]state{}
		// Each value with its expiry, read atomically: a key of a
		// millisecond's window may expire between two commands.
		for _, k := range keys {
			r, err := rdb.Eval(ctx, "local v = redis.call('GET', KEYS[1]) if not v then return false end return {v, redis.call('PEXPIRETIME', KEYS[1])}", []string{k}).Slice()
			if err == redis.Nil {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			out[k] = state{r[0].(string), r[1].(int64)}
		}
		return out
	}
	check := func(step int, what string) {
		t.Helper()
		for k, s := range snapshot() {
			if s.exp <= 0 {
				t.Fatalf("step %d (%s): key %s has no expiry (%d)", step, what, k, s.exp)
			}
			if len(s.val) < 14 {
				t.Fatalf("step %d (%s): key %s of %d bytes", step, what, k, len(s.val))
			}
			if rec := int64(uintN(s.val[8:14])); rec != 0 && rec != s.exp {
				t.Fatalf("step %d (%s): key %s: header records expiry %d, key expires at %d", step, what, k, rec, s.exp)
			}
		}
	}
	paths := map[string]int{}
	defer func() { t.Logf("paths: %v", paths) }()
	for step := range 2500 {
		switch op := rng.IntN(10); {
		case op == 0:
			// Plant a log: entries around now, some ahead of the clock.
			k := keys[rng.IntN(len(keys))]
			w := 4 + rng.IntN(3)
			now := nowMicros()
			window := windows[rng.IntN(len(windows))].Microseconds()
			base := now - rng.Int64N(2*window+1)
			var times []int64
			tm := base
			entries, gap := rng.IntN(6), window/2
			if rng.IntN(3) == 0 {
				entries, gap = 250+rng.IntN(200), window/1000
			}
			for range entries {
				tm += rng.Int64N(gap + 1)
				if tm-base >= 1<<(8*w) {
					break
				}
				times = append(times, tm)
			}
			if len(times) == 0 {
				times = append(times, base)
			}
			newest := times[len(times)-1]
			exp := (newest+window+999)/1000 + rng.Int64N(window/1000+1)
			raw := []byte(EncodeLog(w, base, times...))
			if rng.IntN(2) == 0 {
				var e [8]byte
				binary.LittleEndian.PutUint64(e[:], uint64(exp))
				copy(raw[8:14], e[:6])
			}
			if err := rdb.Set(ctx, k, raw, 0).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.PExpireAt(ctx, k, time.UnixMilli(exp))
			check(step, "plant")
		case op == 1 && len(admitted) > 0:
			a := admitted[rng.IntN(len(admitted))]
			if err := takeBack.run(ctx, rdb, []string{a.key}, a.at).Err(); err != nil {
				t.Fatalf("step %d: take back: %v", step, err)
			}
			check(step, "take back")
		default:
			n := 1 + rng.IntN(3)
			var ks []string
			var spec []byte
			win := map[string]int64{}
			for range n {
				k := keys[rng.IntN(len(keys))]
				window := windows[rng.IntN(len(windows))]
				count := 1 + rng.IntN(6)
				if rng.IntN(2) == 0 {
					count = 500
				}
				r := Rule{Name: "x", Limit: Limit{Count: count, Window: window}}
				ks = append(ks, k)
				spec = appendSpec(spec, r)
				win[k] = max(win[k], window.Microseconds())
			}
			before := snapshot()
			reply, err := slidingWindow.run(ctx, rdb, ks, spec).Text()
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if reply[0] == 0 {
				after := snapshot()
				for k, s := range after {
					if b, ok := before[k]; !ok || b != s {
						t.Fatalf("step %d: a rejection changed key %s", step, k)
					}
				}
				check(step, "rejected")
				continue
			}
			for i, k := range ks {
				at := int64(binary.LittleEndian.Uint64([]byte(reply[1+12*i+4 : 1+12*i+12])))
				admitted = append(admitted, struct {
					key string
					at  int64
				}{k, at})
			}
			after := snapshot()
			for k, window := range win {
				s, ok := after[k]
				if b, was := before[k]; was && ok {
					switch {
					case b.exp == s.exp && len(s.val) > 1024 && s.val[:14] == b.val[:14] && s.val[:len(b.val)] == b.val:
						paths["appended"]++
					case b.exp == s.exp:
						paths["kept expiry"]++
					default:
						paths["moved expiry"]++
					}
				}
				if !ok && window < 50000 {
					continue // a window of milliseconds may have passed
				}
				if !ok {
					t.Fatalf("step %d: admitted, yet key %s is gone", step, k)
				}
				times, err := DecodeLog(s.val)
				if err != nil || len(times) == 0 {
					t.Fatalf("step %d: key %s: %v", step, k, err)
				}
				newest := times[len(times)-1]
				if s.exp*1000 < newest+window {
					t.Fatalf("step %d: key %s expires at %d ms, before its newest entry %d µs leaves a window of %d µs", step, k, s.exp, newest, window)
				}
			}
			check(step, "admitted")
		}
		if rng.IntN(50) == 0 {
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
		}
	}
}
