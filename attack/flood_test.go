package attack_test

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/testenv"
)

// widest records the most arguments of any one command the watch sends:
// Redis runs a command, a script whole, before it answers anyone else.
type widest struct{ args atomic.Int64 }

func (*widest) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *widest) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}

func (h *widest) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.note(c)
		}
		return next(ctx, cmds)
	}
}

func (h *widest) note(c redis.Cmder) {
	if n := int64(len(c.Args())); n > h.args.Load() {
		h.args.Store(n)
	}
}

// TestFloodOfFreshAccountsKeepsRedisServing: sign-ins for a fresh account
// each, which the limits reject from memory at tens of thousands a second,
// fill a replica's batch (200,000 accounts and networks). Its flush gives
// Redis no command of more than a few thousand arguments, where one script
// adding every account would keep Redis from every other client (the
// limits' decisions among them) for as long as it took; the distinct
// accounts are all counted, and a network that was failing before the
// batch filled is still counted and ranked.
func TestFloodOfFreshAccountsKeepsRedisServing(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	h := &widest{}
	rdb.AddHook(h)
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC)}
	w, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: rdb, Prefix: prefix, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	heavy := netip.MustParseAddr("203.0.113.9")
	failAt := func(addr netip.Addr, account string, o auth.Outcome) {
		w.Observe(auth.SignInAttempt{At: clk.Now(), Account: account, Client: auth.Client{Addr: addr}, Outcome: o})
	}
	failAt(heavy, "someone@example.com", auth.OutcomeFailed)
	const flood = 210_000 // past the batch's room
	pad := strings.Repeat("x", 200)
	for i := range flood {
		failAt(netip.AddrFrom4([4]byte{198, 51, 100, 7}), fmt.Sprintf("%s%d@example.com", pad, i), auth.OutcomeRejected)
	}
	for range 99 {
		failAt(heavy, "someone@example.com", auth.OutcomeFailed)
	}
	tick(t, w)
	if n := h.args.Load(); n > 5000 {
		t.Errorf("a command of %d arguments: Redis serves no one else while it runs", n)
	}
	st, err := w.AttackStatus(t.Context(), clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	// What the batch had room for: all but its two networks.
	want := float64(200_000 - 2)
	if got := float64(st.DistinctAccounts); math.Abs(got-want) > 0.03*want {
		t.Errorf("%d distinct accounts, want about %.0f (a HyperLogLog's error is under 1%%)", st.DistinctAccounts, want)
	}
	if st.Attempts != flood+100 {
		t.Errorf("%d attempts counted, want %d: the counts stay exact past the batch's room", st.Attempts, flood+100)
	}
	want2 := []dashboard.Ranked{{Name: "198.51.100.0/24", Count: flood}, {Name: attack.Network(heavy), Count: 100}}
	if !slices.Equal(st.TopNetworks, want2) {
		t.Errorf("top networks %v; want %v: the flood's and, with its 100 failures, the network failing before it", st.TopNetworks, want2)
	}
}

// TestRankingKeepsASteadyAttacker: a network that fails once a second,
// the most of any over the minute, is ranked, though 200 networks that
// failed twice each, once, filled the ranking before it came back; a
// ranking that dropped its lowest each second dropped it every time.
func TestRankingKeepsASteadyAttacker(t *testing.T) {
	ws, clk, _, _, _ := replicas(t, 1, attack.DefaultConfig())
	w := ws[0]
	heavy := netip.MustParseAddr("203.0.113.9")
	observe := func(addr netip.Addr) {
		w.Observe(auth.SignInAttempt{At: clk.Now(), Account: "x@example.com", Client: auth.Client{Addr: addr}, Outcome: auth.OutcomeFailed})
	}
	for i := range 200 {
		addr := netip.AddrFrom4([4]byte{10, byte(i), 0, 1})
		observe(addr)
		observe(addr)
	}
	observe(heavy)
	tick(t, w)
	for range 59 {
		clk.Add(time.Second)
		observe(heavy)
		tick(t, w)
	}
	st, err := w.AttackStatus(t.Context(), clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Space-Saving counts a network new to a full ranking from the
	// lowest's count: never under its own, over by at most that.
	if len(st.TopNetworks) == 0 || st.TopNetworks[0].Name != attack.Network(heavy) ||
		st.TopNetworks[0].Count < 60 || st.TopNetworks[0].Count > 62 {
		t.Fatalf("top networks %v; want %s first, with about its 60 failures", st.TopNetworks, attack.Network(heavy))
	}
}
