// Package ratelimit holds XCloak's request limits in Redis, exactly, under any
// concurrency and across any number of XCloak replicas.
//
// Each [Rule] is a sliding-window log: the times at which requests were
// admitted in the last [Limit.Window], in microseconds of Redis' clock,
// packed in one string per rule and identity (4 to 6 bytes an entry after a
// 14-byte header, see sliding_window.lua), so that exactly Limit.Count
// requests are admitted in any window and a rejection can say exactly when
// the next admission will be. One Lua script (sliding_window.lua) reads
// Redis' clock, counts each window and, only when there is room, records the
// request, all in one atomic step; a rejected request writes nothing. Every
// key a script touches arrives in KEYS and carries one hash tag, so the same
// code runs on a single Redis and on a Redis Cluster; every key expires one
// window after its newest entry at the earliest, and at most an eighth of a
// window later: an expiry is set that far ahead, and recorded in the log's
// header, so that the admissions until then write the log's value alone
// (moving a key's expiry costs Redis more than writing its value).
//
// A request is usually checked against several rules at once (per client
// network and per account). [Limiter.AllowAll] does that in one round trip and
// admits the request only when every rule admits it. A request rejected by any
// rule consumes quota in none. On one Redis (every deployment but a cluster)
// all of a request's rules are decided by one execution of the script, which
// records the request in all of them or in none: nothing is ever taken back,
// and no request sees another's entry that is about to go. An attacker who
// is blocked by one rule therefore cannot keep draining another (a blocked
// address cannot use up a victim's account quota), and a request that never
// reaches password checking counts nowhere.
//
// On a Redis Cluster one script can only touch one slot, and rules of
// different names have different hash tags. The rules whose keys share a
// slot are decided by one script; the groups are sent in one pipeline, and
// when some group rejected, the entries the others made are taken back
// (take_back.lua), a second round trip. Until it lands the reserved entry
// can make a concurrent request see one slot fewer; that errs towards
// rejecting and never admits a request past any limit.
//
// Every script and command that writes is sent to Redis at most once
// (internal/redisonce): go-redis' cluster client would otherwise send it
// again after a read timeout or a dropped connection, whatever its
// MaxRetries, and Redis may have run the first, so that one request would
// count twice in a log, one failure twice towards a lock, and the second
// run of the failure that locks would find its own lock and report no
// LockedNow. A late answer is an error instead, and the request counts as
// the first run left it.
//
// The sorted sets of the logs before the packed format were kept under keys
// without a suffix, the packed logs without their expiry in the header under
// keys ending in ":log2"; today's end in ":log3" ([Keys.Log]), so that a
// replica of one version never reads another's log as its own.
//
// [Lockouts] count consecutive failures per identity in Lua and lock it,
// longer at each repeat; a [Rule] marked Lockable rejects while its identity
// is locked, in the same step as its count. A lock-only rule
// ([Rule.LockOnly]: Lockable, with no Limit) has no count and no log: where
// the lock is the whole verdict, the decision only reads it, and an
// admission writes nothing for it. How long each lock lasts is
// computed in Go alone, by [LockoutPolicy.LockFor], and handed to the script
// as arguments, so that no two stores can escalate differently.
//
// # One contract, three stores
//
// A [Store] decides a request's rules (AllowAll), records a failure under a
// lockable rule's name (Fail; a failure that repeats an attempt the identity
// already failed with counts once), ends a lock while keeping its level (Clear),
// puts in locks recorded elsewhere (Hold), forgets a rule's log (Reset), and
// holds a place towards a lock for an attempt whose failure is yet to be
// counted (BeginAttempt, EndAttempt), so that attempts made at once never
// pass the threshold. A rule with a [Place] takes that place with the
// decision, in the same script: an admitted request's places are taken
// all or none, and where the attempts in flight refuse one, the request
// is admitted without them, as by a decision followed by BeginAttempt,
// and its caller waits for them with BeginAttempt. Three stores satisfy it:
//
//   - [RedisStore], shared by every replica: a [Limiter] and, for each
//     lockable rule name it is configured with, the [Lockouts] of that name.
//   - [Local], in one process, with the same semantics, memory bounded by
//     a count of identities.
//   - [Failover], which composes a shared Store and a local one through the
//     contract alone and chooses between them by a [FailurePolicy].
//
// One conformance suite (store_test.go) runs the same table of cases, from
// exact admissions under concurrency to the expiry of every key, against a
// single Redis, a Redis Cluster and Local, and against a Failover with Redis
// up and with Redis gone.
//
// [Limiter.RememberRejections] lets a process repeat, for up to a second,
// Redis' answer that a rule is full or locked: such a rule stays full until
// its oldest needed entry leaves the window, so repeating the answer never
// admits anything Redis would refuse, and a flood against one identity then
// costs no round trip at all. Store.Remembered asks that memory alone,
// before work that a rejection would waste (a lookup in a database, say).
//
// [Failover] applies a [FailurePolicy] while Redis is unreachable ([IsOutage]
// says when it is: never because a request was cancelled, and a slow answer,
// [IsSlow], only once a probe's pings confirm it): the local store enforces
// the same rules and lockouts in process, starting from the locks in force
// recorded elsewhere (Failover.Restore, put in with Hold), or every decision
// fails closed, or every request is admitted; a probe hands back to Redis
// when it answers, after holding there the locks made meanwhile.
//
// The seed design's check-then-act limiter lives in the subpackage baseline,
// for tests, benchmarks and the credential-stuffing simulator only.
package ratelimit
