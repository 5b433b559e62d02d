package web_test

import "math/rand/v2"

// roundOrders returns a function that gives, at each call, the indices
// of n cases in an order of its own, drawn from a fixed seed, for the
// timing benchmarks' rounds. A rotated order would keep each case's
// neighbours: what the case before leaves behind (a hash's cache misses,
// a mail's work) would fall on the same case every round, and a 429 that
// follows a hash takes several times as long as one that follows another
// 429, whatever the account.
func roundOrders(n int) func() []int {
	order := make([]int, n)
	for j := range order {
		order[j] = j
	}
	r := rand.New(rand.NewPCG(1, 2))
	return func() []int {
		r.Shuffle(n, func(x, y int) { order[x], order[y] = order[y], order[x] })
		return order
	}
}
