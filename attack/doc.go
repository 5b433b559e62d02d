// Package attack watches sign-in attempts and keeps attack mode: the state
// a deployment enters when credential stuffing or a password spray is under
// way, which new-device verification and the dashboard act on.
//
// A Watch hears every attempt's outcome (auth.AttackWatch). It counts them
// in process, per second, and trips at once when this replica's own window
// passes a threshold; about once a second it adds what it counted to short
// buckets in Redis, which every replica shares, and trips when the sum of
// all replicas does. The same signals are summed over a long window, by
// minute, so that a run paced under the short window's floors still trips
// (Config.TripLong). Thresholds are each the larger of a floor and a factor
// times the recent baseline of the same signal, capped at a multiple of
// the floor (Config.Trip), so a busy deployment's ordinary failures do not
// trip it and failures raised slowly cannot lift them without bound.
//
// Attack mode itself lives in Redis (active, since, trigger, by whom), is
// entered and left by one script so that exactly one replica records each
// change, and is cached by every replica: Active is an atomic load.
//
// A flush that fails (a timeout, a failover) loses nothing: its batch
// waits, numbered, for the next flush that reaches Redis, whose script
// applies each batch once, whether the failed flush had applied it or
// not; and a trip of this replica's window waits until the script of
// attack mode's state has recorded it. Both scripts go out as commands
// go-redis never sends again (internal/redisonce), which a cluster client
// would otherwise do after a read timeout: a second "hit" would hide the
// start from the replica that caused it. For the same reason a state
// call that went unanswered goes again, at the next Tick, under the name
// it had, and state.lua tells it the change the first one made.
//
// Memory in Redis is bounded whatever the number of attacking addresses:
// distinct accounts and networks are HyperLogLogs, the ranking of networks
// is a sorted set of at most 200 (Space-Saving), and every key expires.
// No command a flush sends holds Redis for long: the HyperLogLogs'
// members, which a flood of fresh accounts makes hundreds of thousands,
// go in PFADDs of their own, 1,000 at a time, outside the script.
package attack
