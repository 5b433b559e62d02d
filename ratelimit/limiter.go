package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Rule is one limit applied to one identity.
type Rule struct {
	// Name names the rule, such as "login_ip"; rules with the same name
	// share their logs. It is 1 to 32 characters from [a-z0-9_].
	Name string
	// ID is the identity limited: a client network, a normalised email, a
	// device id. Any string works; it is hashed into the key.
	ID string
	// Limit is how many requests the rule admits per window.
	Limit Limit
	// Lockable makes the rule also reject, with Result.Locked, while the
	// identity is locked out by the [Lockouts] of the same name.
	Lockable bool
}

// Result is one rule's verdict on one request.
type Result struct {
	// Name is the rule's name.
	Name string
	// Limit is the limit that was applied.
	Limit Limit
	// Allowed reports whether this rule admits the request.
	Allowed bool
	// Locked reports that the rule rejected because its identity is
	// locked out; RetryAfter is then the time the lock has left.
	Locked bool
	// Count is the number of requests the rule holds in its window after
	// the decision: the request itself is included only when the whole
	// decision admitted it.
	Count int
	// Remaining is how many more requests the rule would admit right now.
	Remaining int
	// RetryAfter is, for a rejection, how long until this rule admits one
	// more request: exact to the microsecond of Redis' clock, never zero
	// and never early. It is zero when Allowed.
	RetryAfter time.Duration
}

// Decision is the verdict on one request checked against several rules.
type Decision struct {
	// Allowed reports whether every rule admitted the request. Only then
	// does the request count in any rule.
	Allowed bool
	// Results holds each rule's verdict, in the order the rules were given.
	Results []Result
	// RetryAfter is, for a rejection, the longest RetryAfter of the rules
	// that rejected: the earliest time a retry can succeed. Zero when
	// Allowed.
	RetryAfter time.Duration
	// FromMemory reports a rejection answered from the rejections this
	// process remembers (Limiter.RememberRejections) without asking
	// Redis. Only the rejecting rules' results are real; the others were
	// not consulted.
	FromMemory bool
}

// RetryAfterSeconds returns RetryAfter in whole seconds, rounded up, as the
// Retry-After header wants it: a client that waits that long is not early.
func (d Decision) RetryAfterSeconds() int {
	return ceilSeconds(d.RetryAfter)
}

// Rejected returns the results of the rules that rejected the request.
func (d Decision) Rejected() []Result {
	var out []Result
	for _, r := range d.Results {
		if !r.Allowed {
			out = append(out, r)
		}
	}
	return out
}

func ceilSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

// Limiter enforces rules on a Redis or a Redis Cluster. It is safe for
// concurrent use, and any number of Limiters on any number of hosts that
// share a Redis and a prefix enforce the same limits together.
type Limiter struct {
	rdb    redis.UniversalClient
	prefix string
	// single is set for a client of one Redis, where one script may touch
	// any key: a request's rules are then decided in one script.
	single bool
	// rejections, when set, answers for rules Redis recently said were
	// full (see RememberRejections).
	rejections *rejections
}

// RememberRejections makes l remember, for at most ttl, that a rule Redis
// said was full (or locked) still is, and reject requests for it without a
// round trip (at most maxKeys rules are remembered). This never admits a
// request Redis would reject; it can keep rejecting up to ttl after an
// entry was taken back, a rule Reset, or an identity unlocked by another
// process (Forget covers this one). Call it before l is used; ttl <= 0
// leaves every decision to Redis.
func (l *Limiter) RememberRejections(ttl time.Duration, maxKeys int) {
	if ttl > 0 && maxKeys > 0 {
		l.rejections = newRejections(ttl, maxKeys)
	}
}

// NewLimiter returns a Limiter whose keys start with prefix (for example
// "xcloak:"). The prefix must not contain '{' or '}'.
func NewLimiter(rdb redis.UniversalClient, prefix string) (*Limiter, error) {
	if _, err := NewKeys(prefix, "rule"); err != nil {
		return nil, err
	}
	_, single := rdb.(*redis.Client)
	return &Limiter{rdb: rdb, prefix: prefix, single: single}, nil
}

// Allow checks one rule and records the request if it is admitted.
func (l *Limiter) Allow(ctx context.Context, rule Rule) (Result, error) {
	d, err := l.AllowAll(ctx, rule)
	if err != nil {
		return Result{}, err
	}
	return d.Results[0], nil
}

// AllowAll checks a request against every rule in one round trip and admits
// it only if all of them do. A rejected request consumes quota in no rule
// (see the package documentation). On error the request must be treated as
// not decided. What it recorded is taken back, except when Redis ran the
// script but its answer was lost (a timeout, a dropped connection): the
// request then counts in its rules as if admitted, which is only stricter.
func (l *Limiter) AllowAll(ctx context.Context, rules ...Rule) (Decision, error) {
	if err := validRules(rules); err != nil {
		return Decision{}, err
	}
	keys := make([][]string, len(rules))
	for i, r := range rules {
		keys[i] = l.keys(r)
	}
	if d, ok := l.remembered(rules, keys); ok {
		return d, nil
	}
	groups := l.groups(keys)
	cmds := l.eval(ctx, rules, keys, groups)
	d := Decision{Allowed: true, Results: make([]Result, len(rules))}
	// Each admission's time in its log, for takeBack.
	var buf [4]int64
	at := buf[:]
	if len(rules) > len(buf) {
		at = make([]int64, len(rules))
	}
	at = at[:len(rules)]
	var firstErr error
	for g, group := range groups {
		err := parseGroup(rules, group, cmds[g], d.Results, at)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("ratelimit: rules %s: %w", names(rules, group), err)
		}
	}
	now := time.Now()
	for i, res := range d.Results {
		if !res.Allowed {
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, res.RetryAfter)
			if l.rejections != nil && firstErr == nil {
				l.rejections.remember(keys[i][0], res.RetryAfter, res.Locked, now)
			}
		}
	}
	if !d.Allowed && len(groups) > 1 {
		l.takeBack(ctx, d.Results, keys, at)
	}
	if firstErr != nil {
		return Decision{}, firstErr
	}
	return d, nil
}

// Remembered reports whether l remembers (RememberRejections) that one of
// rules rejects now, and if so the rejection AllowAll would answer from
// that memory, without asking Redis. It never admits and records nothing:
// false means only that l remembers no rejection of rules (or rules are
// invalid), not that AllowAll would admit them.
func (l *Limiter) Remembered(rules ...Rule) (Decision, bool) {
	if l.rejections == nil || validRules(rules) != nil {
		return Decision{}, false
	}
	keys := make([][]string, len(rules))
	for i, r := range rules {
		keys[i] = l.keys(r)
	}
	return l.remembered(rules, keys)
}

// remembered answers a request from the remembered rejections when one of
// its rules is among them. The other rules are not consulted: their results
// say Allowed, with no counts, and the decision says FromMemory.
func (l *Limiter) remembered(rules []Rule, keys [][]string) (Decision, bool) {
	if l.rejections == nil {
		return Decision{}, false
	}
	now := time.Now()
	var d Decision
	for i, r := range rules {
		left, locked := l.rejections.lookup(keys[i][0], now)
		if left <= 0 {
			continue
		}
		if d.Results == nil {
			d.Results = make([]Result, len(rules))
			for j, r := range rules {
				d.Results[j] = Result{Name: r.Name, Limit: r.Limit, Allowed: true}
			}
			d.FromMemory = true
		}
		d.Results[i] = Result{Name: r.Name, Limit: r.Limit, Count: r.Limit.Count, RetryAfter: left, Locked: locked}
		d.RetryAfter = max(d.RetryAfter, left)
	}
	return d, d.Results != nil
}

// Forget drops what l remembers of rule name for id, so that the next
// decision asks Redis: after an unlock, for instance.
func (l *Limiter) Forget(name, id string) {
	if l.rejections != nil {
		l.rejections.forget(Keys{prefix: l.prefix, kind: name}.Log(id))
	}
}

// Reset forgets every request recorded for id under the rule name.
func (l *Limiter) Reset(ctx context.Context, name, id string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("ratelimit: rule name %q: %w", name, err)
	}
	return l.rdb.Del(ctx, Keys{prefix: l.prefix, kind: name}.Log(id)).Err()
}

// keys returns the keys valid rule r's script touches: its log and, for a
// Lockable rule, its identity's lock.
func (l *Limiter) keys(r Rule) []string {
	k := Keys{prefix: l.prefix, kind: r.Name}
	if r.Lockable {
		return []string{k.Log(r.ID), lockKey(k, r.ID)}
	}
	return []string{k.Log(r.ID)}
}

// validRules reports whether rules can be decided: at least one, each
// with a valid name and limit. Every store checks a request's rules by it.
func validRules(rules []Rule) error {
	if len(rules) == 0 {
		return errors.New("ratelimit: no rules")
	}
	for _, r := range rules {
		if err := checkName(r.Name); err != nil {
			return fmt.Errorf("ratelimit: rule name %q: %w", r.Name, err)
		}
		if err := r.Limit.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// groups splits a request's rules into those one script can decide
// together: all of them on one Redis; on a Redis Cluster (or any client
// that spreads keys by hash slot), those whose keys share a slot. Each
// group holds the indexes of its rules, in order.
func (l *Limiter) groups(keys [][]string) [][]int {
	if len(keys) == 1 {
		return oneGroup
	}
	if l.single {
		all := make([]int, len(keys))
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	var out [][]int
	slots := make([]int, 0, len(keys))
	for i, k := range keys {
		s := slot(k[0])
		j := slices.Index(slots, s)
		if j < 0 {
			slots = append(slots, s)
			out = append(out, nil)
			j = len(out) - 1
		}
		out[j] = append(out[j], i)
	}
	return out
}

// oneGroup is the groups of a request with one rule; never written to.
var oneGroup = [][]int{{0}}

// eval runs the script once per group, in one round trip. A group whose
// node answered NOSCRIPT did not run, so it alone is sent again with EVAL.
func (l *Limiter) eval(ctx context.Context, rules []Rule, keys [][]string, groups [][]int) []*redis.Cmd {
	args := func(group []int) ([]string, []any) {
		var ks []string
		a := make([]any, 1, 1+3*len(group))
		a[0] = len(group)
		for _, i := range group {
			r := rules[i]
			ks = append(ks, keys[i]...)
			lockable := 0
			if r.Lockable {
				lockable = 1
			}
			a = append(a, r.Limit.Count, r.Limit.Window.Microseconds(), lockable)
		}
		return ks, a
	}
	if len(groups) == 1 {
		ks, a := args(groups[0])
		return []*redis.Cmd{slidingWindow.Run(ctx, l.rdb, ks, a...)}
	}
	return runAll(ctx, l.rdb, slidingWindow, len(groups), func(g int) ([]string, []any) { return args(groups[g]) })
}

// runAll runs script n times in one pipeline, with the keys and arguments
// of each run, by EVALSHA; runs that met NOSCRIPT are sent again by EVAL.
func runAll(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, n int, of func(i int) ([]string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	pipe := rdb.Pipeline()
	for i := range n {
		ks, a := of(i)
		cmds[i] = script.EvalSha(ctx, pipe, ks, a...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := rdb.Pipeline()
		for _, i := range again {
			ks, a := of(i)
			cmds[i] = script.Eval(ctx, pipe, ks, a...)
		}
		_, _ = pipe.Exec(ctx)
	}
	return cmds
}

// takeBackTimeout bounds a take-back: long enough to wait out a loaded
// cluster's queue for connections (an entry left behind over-counts until
// it leaves the window), short enough that a node gone dead does not hold
// the answer long after the decision.
const takeBackTimeout = 2 * time.Second

// takeBack removes the entries a request made in the groups that admitted
// it after another group rejected it (or failed), on a cluster. It runs
// even if the caller's context is done, since an entry left behind would
// only over-count; and if it fails, that is all that happens until the
// entry leaves the window.
func (l *Limiter) takeBack(ctx context.Context, results []Result, keys [][]string, at []int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), takeBackTimeout)
	defer cancel()
	var admitted []int
	for i := range results {
		if at[i] != 0 {
			admitted = append(admitted, i)
			results[i].Count--
			results[i].Remaining++
		}
	}
	if len(admitted) > 0 {
		runAll(ctx, l.rdb, takeBack, len(admitted), func(j int) ([]string, []any) {
			i := admitted[j]
			return keys[i][:1], []any{at[i]}
		})
	}
}

// parseGroup reads the script's answer for the rules of group into
// results, and the time each admission was recorded at into at.
func parseGroup(rules []Rule, group []int, cmd *redis.Cmd, results []Result, at []int64) error {
	for _, i := range group {
		results[i] = Result{Name: rules[i].Name, Limit: rules[i].Limit}
	}
	vals, err := cmd.Int64Slice()
	if err != nil {
		return err
	}
	if len(vals) != 5*len(group) {
		return fmt.Errorf("unexpected reply %v", vals)
	}
	for j, i := range group {
		v := vals[5*j : 5*j+5]
		r := rules[i]
		res := Result{
			Name:       r.Name,
			Limit:      r.Limit,
			Allowed:    v[0] == 1,
			Count:      int(v[1]),
			RetryAfter: time.Duration(v[2]) * time.Microsecond,
			Locked:     v[3] == 1,
		}
		res.Remaining = max(r.Limit.Count-res.Count, 0)
		results[i], at[i] = res, v[4]
	}
	return nil
}

// names lists the names of the rules of group, for an error.
func names(rules []Rule, group []int) string {
	s := make([]string, len(group))
	for j, i := range group {
		s[j] = rules[i].Name
	}
	return strings.Join(s, ", ")
}
