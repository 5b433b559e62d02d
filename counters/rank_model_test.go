package counters

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
)

// TestRankScriptAgainstAReference adds random batches to capped rankings
// through rank.lua and through a reference that takes the batch's members
// one at a time, as Space-Saving is written: the members already in the
// ranking counted first, then each new one, the highest first, given a
// place while there is room and past it the lowest member's, with its
// count (by score, then by the member: these names, a letter and digits,
// are in the same order by their bytes and by Lua's).
// After every batch the ranking is the reference's, member for member
// and count for count, and once full its counts sum to every count added.
// Batches past the script's chunk of arguments are among them.
func TestRankScriptAgainstAReference(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	for _, tc := range []struct {
		cap, pool, batch, batches int
	}{
		{cap: 5, pool: 12, batch: 6, batches: 300},
		{cap: 20, pool: 60, batch: 30, batches: 200},
		{cap: 1000, pool: 3000, batch: 1300, batches: 6},
	} {
		t.Run(fmt.Sprintf("cap %d", tc.cap), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(uint64(tc.cap), 7))
			key := fmt.Sprintf("%srank-model-%d", prefix, tc.cap)
			want := map[string]float64{}
			var total float64
			for b := range tc.batches {
				set := map[string]float64{}
				for range 1 + rnd.IntN(tc.batch) {
					// Few distinct counts, so that ties are common.
					set[fmt.Sprintf("m%d", rnd.IntN(tc.pool))] += float64(1 + rnd.IntN(3))
				}
				members := heaviestFirst(set)
				args := []any{tc.cap, 60000}
				for _, m := range members {
					args = append(args, m.name, m.n)
					total += m.n
				}
				if err := rdb.Eval(context.Background(), rankLua, []string{key}, args...).Err(); err != nil && err != redis.Nil {
					t.Fatal(err)
				}
				referenceRank(want, tc.cap, members)
				got := map[string]float64{}
				zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				var sum float64
				for _, z := range zs {
					got[z.Member.(string)] = z.Score
					sum += z.Score
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("batch %d: ranking\n%v\nwant\n%v", b, got, want)
				}
				if len(got) == tc.cap && sum != total {
					t.Fatalf("batch %d: full ranking's counts sum to %v, want every count added, %v", b, sum, total)
				}
			}
		})
	}
}

// referenceRank adds batch, the highest first, to the ranking set of at
// most capped members, one member at a time.
func referenceRank(set map[string]float64, capped int, batch []counted) {
	var fresh []counted
	for _, m := range batch {
		if _, ok := set[m.name]; ok {
			set[m.name] += m.n
		} else {
			fresh = append(fresh, m)
		}
	}
	for _, m := range fresh {
		n := m.n
		if len(set) >= capped {
			lowest, first := "", true
			for name, s := range set {
				if first || s < set[lowest] || s == set[lowest] && name < lowest {
					lowest, first = name, false
				}
			}
			n += set[lowest]
			delete(set, lowest)
		}
		set[m.name] = n
	}
}
