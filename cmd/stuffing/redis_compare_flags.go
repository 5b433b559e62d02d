package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/ratelimit"
)

// defaultCompareRedisURL keeps a comparison's keys out of the database the
// tests scan.
const defaultCompareRedisURL = "redis://127.0.0.1:6379/15"

// redisCompareFlags are the flags limiter-compare and script-compare
// share: where the Redis is, how many rounds of how long, the limit, the
// order's seed, the report's form and the run's key prefix.
type redisCompareFlags struct {
	redisURL string
	rounds   int
	duration time.Duration
	limit    int
	seed     uint64
	jsonOut  bool
	base     string
	allow    bool
}

// addRedisCompareFlags defines the shared flags on fs, with the command's
// defaults for the rounds, their length and the key prefix; roundsHelp
// says what a round is.
func addRedisCompareFlags(fs *flag.FlagSet, rounds int, duration time.Duration, base, roundsHelp string) *redisCompareFlags {
	f := &redisCompareFlags{}
	fs.StringVar(&f.redisURL, "redis", defaultCompareRedisURL, "`URL` of the Redis to measure")
	fs.IntVar(&f.rounds, "rounds", rounds, roundsHelp+" (`n`)")
	fs.DurationVar(&f.duration, "duration", duration, "how long each contender runs in each round (10ms to 1m)")
	fs.IntVar(&f.limit, "limit", 10, "requests per minute each rule admits (`n`)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the rounds' order; 0 picks one, which the report prints")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as JSON; progress goes to stderr")
	fs.StringVar(&f.base, "key-prefix", base, "start of the run's key `prefix`; random hex and ':' are added")
	fs.BoolVar(&f.allow, "allow-non-loopback", false, "allow a Redis that is not on this machine's loopback")
	return f
}

// check refuses shared flags out of their bounds, as a usage error.
func (f *redisCompareFlags) check(stderr io.Writer) error {
	switch {
	case f.rounds < 1 || f.rounds > maxTrials:
		return badFlag(stderr, "--rounds %d out of range 1..%d", f.rounds, maxTrials)
	case f.limit < 1 || f.limit > ratelimit.MaxCount:
		return badFlag(stderr, "--limit %d out of range 1..%d", f.limit, ratelimit.MaxCount)
	}
	if err := inBounds("duration", f.duration, 10*time.Millisecond, time.Minute); err != nil {
		return badFlag(stderr, "%v", err)
	}
	return nil
}

// start makes the run's key prefix, picks a seed when none was given, and
// connects to the Redis with pool connections; describe says what was
// reached. The caller closes rdb.
func (f *redisCompareFlags) start(ctx context.Context, stderr io.Writer, pool int) (rdb redis.UniversalClient, describe, prefix string, err error) {
	prefix, err = newRunPrefix(f.base)
	if err != nil {
		return nil, "", "", badFlag(stderr, "%v", err)
	}
	if f.seed == 0 {
		f.seed = randomUint64()%1_000_000_000 + 1
	}
	rdb, describe, err = redisTarget{url: f.redisURL, pool: pool, allow: f.allow}.connect(ctx)
	if err != nil {
		return nil, "", "", err
	}
	return rdb, describe, prefix, nil
}

// progress is where a run's progress goes: stderr when the report is JSON
// on stdout.
func (f *redisCompareFlags) progress(stdout, stderr io.Writer) io.Writer {
	if f.jsonOut {
		return stderr
	}
	return stdout
}

// finish ends a run that measured under prefixes (the run's own prefix
// first): it deletes their keys, even after a failure or an interrupt, on
// a fresh context, then returns runErr or a failure to delete, else
// writes rep as JSON or with print.
func (f *redisCompareFlags) finish(ctx context.Context, rdb redis.UniversalClient, stdout io.Writer, runErr error,
	rep any, print func(w io.Writer, prefix string), prefixes ...string) error {
	cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	errs := []error{runErr}
	for _, p := range prefixes {
		_, err := deletePrefixed(cleanCtx, rdb, p)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if f.jsonOut {
		return writeJSON(stdout, rep)
	}
	fmt.Fprintln(stdout)
	print(stdout, prefixes[0])
	return nil
}
