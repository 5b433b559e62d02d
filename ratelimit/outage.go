package ratelimit

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// notServing are the starts of the error replies by which Redis says it
// does not serve now, rather than that a command was wrong.
// A TRYAGAIN is not among them: it is a slot in migration (IsSlow).
// OOM (out of memory under noeviction, which a flood of identities can
// bring about) and MISCONF (snapshots failing) refuse every write, and so
// every decision, for as long as they last.
var notServing = []string{"LOADING ", "CLUSTERDOWN ", "MASTERDOWN ", "READONLY ",
	"NOREPLICAS ", "BUSY ", "OOM ", "MISCONF ", "ERR max number of clients reached"}

// IsOutage reports whether err, returned by a Redis call made under ctx,
// means that Redis cannot be reached or is not serving: only then may a
// replica stop trusting Redis and follow its failure policy.
//
// A call cut short because ctx itself ended (the client went away, or its
// request's deadline passed) says nothing about Redis, and neither does an
// ordinary error reply (a script bug, a wrong type): counting those as
// outages would let anyone who can drop a connection switch the shared
// limits off. Nor does a slow answer (IsSlow), which the Failover has a
// probe confirm first, a slot in migration among them, nor a dial this
// process could not make for want of descriptors or ports. What counts: any
// other dial error, a connection reset, refused or closed by Redis (EOF),
// and the replies by which Redis says it is not serving now (LOADING,
// CLUSTERDOWN, MASTERDOWN, READONLY, NOREPLICAS, BUSY, OOM, MISCONF, max
// clients).
func IsOutage(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var op *net.OpError
	switch {
	case IsSlow(ctx, err):
		return false
	case errors.As(err, &op) && op.Op == "dial":
		// Before the context check: go-redis wraps a dial that ran out of
		// DialTimeout in context.DeadlineExceeded.
		return true
	case errors.Is(err, context.Canceled):
		// A context derived from ctx ended early, and ctx still runs:
		// someone gave up on purpose, which is no news about Redis.
		return false
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, net.ErrClosed):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return op != nil
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		// Redis 6.2 gives a refusal met inside a script inside its own
		// error ("ERR Error running script (call to f_...):
		// @user_script: 274: -OOM command not allowed ..."); 7.0 as it is.
		inScript := strings.HasPrefix(msg, "ERR Error running script")
		for _, p := range notServing {
			if strings.HasPrefix(msg, p) || inScript && strings.Contains(msg, ": -"+p) {
				return true
			}
		}
		return false
	}
	// go-redis' own words when no node of a Sentinel set or a ring answers.
	msg := err.Error()
	return strings.Contains(msg, "all sentinels specified in configuration are unreachable") ||
		strings.Contains(msg, "all ring shards are down")
}

// IsSlow reports whether err, returned by a Redis call made under ctx,
// means that Redis, or the way to it, did not answer in time: the call's
// own bound ran out, no connection came free, or a read or write timed
// out. That is what a stuck Redis looks like, but also what a replica
// looks like whose own requests queue for connections and CPU under a
// flood: go-redis reports both alike. A replica that took a flood for an
// outage would fall back to its in-process limits and admit what the
// shared ones refuse, so a slow answer fails the one request and has a
// probe ask Redis whether it is there at all.
//
// A TRYAGAIN counts too: a cluster node says so to a script whose keys are
// in a slot being moved and not all moved yet, while go-redis' retries
// last. Redis is there; that slot is not ready for a moment.
func IsSlow(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		// A dial this process could not even make (out of file
		// descriptors, buffers or local ports) says nothing of Redis: a
		// flood of connections to this replica can cause it. Any other
		// failed dial is an outage.
		return localShortage(err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) || redis.HasErrorPrefix(err, "TRYAGAIN ") {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// localShortage reports whether err is this process or host running out of
// something a dial needs.
func localShortage(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.EADDRNOTAVAIL} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
