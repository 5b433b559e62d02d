package app

import (
	"context"
	"sync"
)

// Ready reports whether Redis and Postgres answer, for /readyz, by their
// names there. A Redis that does not answer puts the limits in degraded
// mode at once.
//
// The two are asked side by side, each within all of ctx: a Redis whose
// host is gone answers nothing until the dial times out, which takes the
// whole bound, and a Postgres asked after it would be reported down with
// it. /readyz would then take every replica out of rotation, where the
// failure policy (local or open) says they serve without Redis.
func (a *App) Ready(ctx context.Context) map[string]error {
	var redisErr, postgresErr error
	var wg sync.WaitGroup
	wg.Go(func() { redisErr = a.Service.CheckRedis(ctx) })
	wg.Go(func() { postgresErr = a.pool.Ping(ctx) })
	wg.Wait()
	return map[string]error{"redis": redisErr, "postgres": postgresErr}
}
