// Command stuffing is XCloak's credential-stuffing simulator. It shows, with
// numbers a user can reproduce, what XCloak's limits hold under attack:
//
//	stuffing limiter   bursts at the seed's check-then-act limiter and at
//	                   XCloak's, on one Redis or a Redis Cluster
//	stuffing http      a botnet's credential list against a running XCloak,
//	                   while a legitimate user keeps signing in
//	stuffing legit-compare  a returning user with and without a flood of
//	                   rejections, interleaved round by round: p99 ratios
//	stuffing distributed  a leaked credential list from a botnet that uses
//	                   each address once or twice, beside returning and
//	                   new-device users: takeovers and attack mode
//	stuffing limiter-compare  XCloak's limiter beside redis_rate and a
//	                   trivial script, interleaved round by round: ratios
//	stuffing script-compare  versions of the limiter's script, interleaved
//	                   round by round: their cost inside Redis
//	stuffing memory    Redis memory per tracked attacker address
//	stuffing hello     a bare Go handler: the HTTP ceiling of this machine
//	stuffing compare   wrk against XCloak's answers and a bare Go handler,
//	                   interleaved round by round: medians and ratios
//	stuffing plot      an SVG of "limiter --json" results
//
// It is safe by design: it refuses targets and Redis servers that are not on
// loopback unless --allow-non-loopback is given, and every run is bounded in
// requests and in time. Run "stuffing <command> --help" for the flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/xcloak/xcloak/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal ends the run early with a report; a second one kills.
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err))
}
