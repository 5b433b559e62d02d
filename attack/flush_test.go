package attack_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
)

// errLost stands for a timeout, a dropped connection or a failover.
var errLost = errors.New("i/o timeout")

// failNext fails, once each, the watch's next pipeline (its flush):
// before sending it or once Redis answered it, and its next state.lua
// call: before sending it, or once Redis ran it (stateUnanswered).
type failNext struct {
	unsent, unanswered, state, stateUnanswered atomic.Bool
}

func (*failNext) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failNext) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		isState := (cmd.Name() == "evalsha" || cmd.Name() == "eval") && isStateKey(cmd.Args())
		if isState && f.state.Swap(false) {
			cmd.SetErr(errLost)
			return errLost
		}
		err := next(ctx, cmd)
		// A script Redis did not know yet ran nothing: the answer lost
		// is that of the one that runs.
		if isState && !redis.HasErrorPrefix(err, "NOSCRIPT") && f.stateUnanswered.Swap(false) {
			cmd.SetErr(errLost)
			return errLost
		}
		return err
	}
}

func (f *failNext) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return slices.ContainsFunc(c.Args(), isWatchKey) }) {
			return next(ctx, cmds) // a connection's setup
		}
		if f.unsent.Swap(false) {
			for _, c := range cmds {
				c.SetErr(errLost)
			}
			return errLost
		}
		err := next(ctx, cmds)
		// A script Redis did not know yet ran nothing: the answer lost
		// is that of the one that runs.
		if len(cmds) > 0 && redis.HasErrorPrefix(cmds[0].Err(), "NOSCRIPT") {
			return err
		}
		if f.unanswered.Swap(false) {
			for _, c := range cmds {
				c.SetErr(errLost)
			}
			return errLost
		}
		return err
	}
}

// isWatchKey reports whether a command's argument is one of the watch's
// keys.
func isWatchKey(arg any) bool {
	s, ok := arg.(string)
	return ok && strings.Contains(s, "{attack:")
}

// isStateKey reports whether a script's arguments name attack mode's
// state.
func isStateKey(args []any) bool {
	return slices.ContainsFunc(args, func(a any) bool { return isWatchKey(a) && strings.HasSuffix(a.(string), ":state") })
}

// TestFailedTickLosesNothing: a tick whose flush or state.lua call fails,
// as a timeout or a failover under the very flood that tripped this
// replica would make it, loses neither the counts nor the trip. The next
// tick that reaches Redis, after the failed ticks' seconds have left the
// window (so that only the trip this replica remembers can switch attack
// mode on), records attack_started once and runs the start's work, and
// the counts of the failed ticks and of those since are in Redis once,
// whether Redis had applied a failed flush or not.
func TestFailedTickLosesNothing(t *testing.T) {
	cfg := attack.DefaultConfig()
	unsent := func(f *failNext) { f.unsent.Store(true) }
	unanswered := func(f *failNext) { f.unanswered.Store(true) }
	for _, tc := range []struct {
		name  string
		fails []func(*failNext) // one per failed tick
	}{
		{"flush not sent", []func(*failNext){unsent}},
		{"flush applied, its answer lost", []func(*failNext){unanswered}},
		{"state not recorded", []func(*failNext){func(f *failNext) { f.state.Store(true) }}},
		{"state recorded, its answer lost", []func(*failNext){func(f *failNext) { f.stateUnanswered.Store(true) }}},
		{"two flushes failed, the first applied", []func(*failNext){unanswered, unsent}},
		{"two flushes applied, their answers lost", []func(*failNext){unanswered, unanswered}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, clk, log, rdb, _ := replicas(t, 2, cfg)
			a, b := ws[0], ws[1]
			f := &failNext{}
			rdb.AddHook(f)
			var mu sync.Mutex
			var starts []time.Time
			a.OnStart(func(_ context.Context, since time.Time) {
				mu.Lock()
				defer mu.Unlock()
				starts = append(starts, since)
			})
			tripped := clk.Now()
			feed(a, clk, 25, auth.OutcomeUnknownAccount, "a") // over the floor of 20
			if !a.Active() {
				t.Fatal("a's own window did not trip")
			}
			for i, fail := range tc.fails {
				fail(f)
				if err := a.Tick(t.Context()); err == nil {
					t.Fatal("the tick met no failure")
				}
				clk.Add(time.Second)
				feed(a, clk, 5, auth.OutcomeUnknownAccount, fmt.Sprint("b", i)) // since the failed tick
			}
			clk.Add(cfg.Window)
			tick(t, a, b)
			if got := log.kinds()[auth.EventAttackStarted]; got != 1 || !a.Active() || !b.Active() {
				t.Fatalf("%d attack_started events, active: a %v, b %v; want one, both on", got, a.Active(), b.Active())
			}
			mu.Lock()
			if want := tripped.Add(-cfg.Lookback()); len(starts) != 1 || !starts[0].Equal(want) {
				t.Errorf("OnStart called with %v, want once with %s", starts, want)
			}
			mu.Unlock()
			st, err := b.AttackStatus(t.Context(), clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			// 25 attempts and five a failed tick, each for an account of its
			// own, from 25 networks, the first five of which failed once
			// more a failed tick.
			n := int64(25 + 5*len(tc.fails))
			if st.Attempts != n || st.UnknownAccounts != n || st.DistinctAccounts != n || st.DistinctNetworks != 25 ||
				len(st.TopNetworks) == 0 || st.TopNetworks[0].Count != int64(1+len(tc.fails)) {
				t.Errorf("status %+v; want each attempt counted once", st)
			}
		})
	}
}

// TestLongOutageSignsOutFromTheTrip: a replica whose window tripped while
// Redis did not answer records the start once it answers again; the
// browsers new to their accounts are signed out from Lookback before the
// trip, not before the tick that recorded it, which would spare those
// that signed in at the other replicas just before it and meanwhile.
func TestLongOutageSignsOutFromTheTrip(t *testing.T) {
	cfg := attack.DefaultConfig()
	ws, clk, _, rdb, _ := replicas(t, 1, cfg)
	a := ws[0]
	f := &failNext{}
	rdb.AddHook(f)
	var starts []time.Time
	a.OnStart(func(_ context.Context, since time.Time) { starts = append(starts, since) })
	tripped := clk.Now()
	feed(a, clk, 25, auth.OutcomeUnknownAccount, "a")
	if !a.Active() {
		t.Fatal("a's own window did not trip")
	}
	f.unsent.Store(true)
	if err := a.Tick(t.Context()); err == nil {
		t.Fatal("the tick met no failure")
	}
	// A failover longer than the lookback.
	clk.Add(2 * cfg.Lookback())
	tick(t, a)
	if want := tripped.Add(-cfg.Lookback()); len(starts) != 1 || starts[0].After(want) {
		t.Errorf("OnStart called with %v, want once with %s at the latest", starts, want)
	}
}

// TestLostAnswerKeepsTheEnd: a tick whose state.lua call ended attack
// mode in Redis but whose answer was lost does not lose the end: the next
// tick, on this replica, is told of it and records attack_ended once.
func TestLostAnswerKeepsTheEnd(t *testing.T) {
	ws, clk, log, _ := endUnanswered(t, 1)
	a := ws[0]
	clk.Add(time.Second)
	tick(t, a)
	tick(t, a)
	if got := log.kinds(); got[auth.EventAttackStarted] != 1 || got[auth.EventAttackEnded] != 1 || a.Active() {
		t.Fatalf("events %v, active %v; want one attack_started, one attack_ended, off", got, a.Active())
	}
}

// TestLostCallKeepsTheSharedTrip: a tick that found the replicas' shared
// window tripped (neither replica's own did) but whose state.lua call
// never reached Redis does not lose the trip: the next tick that reaches
// Redis, after the attack's seconds have left the window, still switches
// attack mode on, once, and signs out from before the trip.
func TestLostCallKeepsTheSharedTrip(t *testing.T) {
	cfg := attack.DefaultConfig()
	ws, clk, log, rdb, _ := replicas(t, 2, cfg)
	a, b := ws[0], ws[1]
	f := &failNext{}
	rdb.AddHook(f)
	var starts []time.Time
	b.OnStart(func(_ context.Context, since time.Time) { starts = append(starts, since) })
	feed(a, clk, 12, auth.OutcomeUnknownAccount, "a")
	feed(b, clk, 12, auth.OutcomeUnknownAccount, "b")
	tick(t, a)
	tripped := clk.Now()
	f.state.Store(true)
	if err := b.Tick(t.Context()); err == nil {
		t.Fatal("the tick met no failure")
	}
	if a.Active() || b.Active() {
		t.Fatal("on without state.lua")
	}
	// Redis answers again once the attack's seconds have left the window.
	clk.Add(2 * cfg.Window)
	tick(t, b, a)
	if !a.Active() || !b.Active() {
		t.Fatalf("active: a %v, b %v; want both on from the trip the lost call carried", a.Active(), b.Active())
	}
	if got := log.kinds()[auth.EventAttackStarted]; got != 1 {
		t.Errorf("%d attack_started events, want 1", got)
	}
	if want := tripped.Add(-cfg.Lookback()); len(starts) != 1 || starts[0].After(want) {
		t.Errorf("OnStart called with %v, want once with %s at the latest", starts, want)
	}
}

// TestLostEndThenATrip: a tick whose state.lua call ended attack mode in
// Redis but whose answer was lost, followed by a new burst that trips the
// shared window before the next tick, loses neither change: the next tick
// records attack_ended for the first call, then attack_started for the
// burst. Sent again as a "hit" under the first call's name, the call would
// start attack mode anew as if it were the call that ended it, and the end
// would never be recorded by any replica.
func TestLostEndThenATrip(t *testing.T) {
	ws, clk, log, _ := endUnanswered(t, 1)
	a := ws[0]
	clk.Add(time.Second)
	feed(a, clk, 25, auth.OutcomeUnknownAccount, "b")
	tick(t, a)
	tick(t, a)
	if got := log.kinds(); got[auth.EventAttackStarted] != 2 || got[auth.EventAttackEnded] != 1 || !a.Active() {
		t.Fatalf("events %v, active %v; want two attack_started, one attack_ended between them, on", got, a.Active())
	}
	kinds := log.inOrder()
	if want := []string{auth.EventAttackStarted, auth.EventAttackEnded, auth.EventAttackStarted}; !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

// TestLostEndThenAnotherReplicasTrip: a tick whose state.lua call ended
// attack mode but whose answer was lost, while another replica's window
// trips and starts it again before the call goes again: the call is still
// told of its end, and attack_ended is recorded once, for the attack that
// ended, between the two starts.
func TestLostEndThenAnotherReplicasTrip(t *testing.T) {
	ws, clk, log, first := endUnanswered(t, 2)
	a, b := ws[0], ws[1]
	clk.Add(time.Second)
	feed(b, clk, 25, auth.OutcomeUnknownAccount, "b")
	tick(t, b)
	tick(t, a, b)
	kinds := log.inOrder()
	if want := []string{auth.EventAttackStarted, auth.EventAttackStarted, auth.EventAttackEnded}; !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v: the end told to the call that made it", kinds, want)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if since := log.events[2].Detail["since"]; since != first.UTC().Format(time.RFC3339) {
		t.Errorf("attack_ended since %s, want the first attack's start %s", since, first.UTC().Format(time.RFC3339))
	}
	if !a.Active() || !b.Active() {
		t.Errorf("active: a %v, b %v; want both on for the second attack", a.Active(), b.Active())
	}
}

// endUnanswered builds n replicas whose first one trips attack mode at
// start (which every replica then learns of), lets its quiet period
// pass, and has the first one's next tick end it in Redis with the
// answer lost.
func endUnanswered(t *testing.T, n int) (ws []*attack.Watch, clk *clock, log *eventLog, start time.Time) {
	t.Helper()
	cfg := attack.DefaultConfig()
	ws, clk, log, rdb, _ := replicas(t, n, cfg)
	f := &failNext{}
	rdb.AddHook(f)
	feed(ws[0], clk, 25, auth.OutcomeUnknownAccount, "a")
	start = clk.Now()
	tick(t, ws...)
	clk.Add(cfg.Quiet)
	f.stateUnanswered.Store(true)
	if err := ws[0].Tick(t.Context()); err == nil {
		t.Fatal("the tick met no failure")
	}
	return ws, clk, log, start
}
