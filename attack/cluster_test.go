package attack_test

import (
	"testing"
	"time"

	"github.com/xcloak/xcloak/attack"
	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
)

// TestCluster: on a Redis Cluster, two replicas' halves of an attack sum
// to a trip, and the panel's multi-key reads (PFCOUNT, ZUNIONSTORE) work,
// every key of the watch sharing one slot.
func TestCluster(t *testing.T) {
	rdb, prefix := testenv.RedisCluster(t)
	other, _ := testenv.RedisCluster(t)
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	log := &eventLog{}
	a, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: rdb, Prefix: prefix, Events: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := attack.New(attack.DefaultConfig(), attack.Deps{Redis: other, Prefix: prefix, Events: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	feed(a, clk, 12, auth.OutcomeUnknownAccount, "a")
	feed(b, clk, 12, auth.OutcomeUnknownAccount, "b")
	tick(t, a, b, a)
	if !a.Active() || !b.Active() {
		t.Fatal("the halves on a cluster did not switch attack mode on")
	}
	st, err := b.AttackStatus(t.Context(), clk.Now())
	if err != nil || !st.Active || st.UnknownAccounts != 24 || st.DistinctAccounts != 24 || st.DistinctNetworks != 12 || len(st.TopNetworks) == 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if got := log.kinds(); got[auth.EventAttackStarted] != 1 {
		t.Fatalf("events %v", got)
	}
}
