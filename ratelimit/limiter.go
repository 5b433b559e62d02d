package ratelimit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/redisonce"
)

// Rule is one limit applied to one identity.
type Rule struct {
	// Name names the rule, such as "login_ip"; rules with the same name
	// share their logs. It is 1 to 32 characters from [a-z0-9_].
	Name string
	// ID is the identity limited: a client network, a normalised email, a
	// device id. Any string works; it is hashed into the key.
	ID string
	// Limit is how many requests the rule admits per window. The zero
	// Limit, on a Lockable rule only, makes a lock-only rule (LockOnly).
	Limit Limit
	// Lockable makes the rule also reject, with Result.Locked, while the
	// identity is locked out by the [Lockouts] of the same name.
	Lockable bool
	// Place, on a Lockable rule, makes the request's admission also begin
	// an attempt against the identity's lockout under the rule's name (as
	// Store.BeginAttempt does), in the same atomic step as the decision,
	// so that the common case costs one round trip. A request's places
	// are taken all or none: where the attempts in flight refuse one
	// (Result.InFlight), none is, and the request is admitted, and counts,
	// all the same, as it would be by a decision followed by
	// BeginAttempt; its caller waits for the places with BeginAttempt. A
	// place is given back with Store.EndAttempt and Result.Token. Only a
	// Store, which knows the lockout's threshold, decides such a rule; a
	// Limiter alone refuses it.
	Place *Place
}

// Place is what an attempt begun with a request's decision needs
// (Rule.Place): the arguments of Store.BeginAttempt.
type Place struct {
	// Attempt fingerprints what is tried: one that Store.Fail would not
	// count again goes ahead without a place; "" always takes one.
	Attempt string
	// TTL is how long the place counts if it is never given back: 1 ms
	// to MaxWindow.
	TTL time.Duration
}

// LockOnly reports whether r is a lock-only rule: Lockable with the zero
// Limit. Such a rule has no limit and no log: it rejects only while its
// identity is locked, with the lock's time left, and records nothing when
// it admits (its Result's Count and Remaining are 0). Its lock works as any
// lockable rule's (Fail, Clear, Hold). It suits a rule whose lock is the
// whole verdict, such as a sprayed password's, where a log would only cost
// a write per request.
func (r Rule) LockOnly() bool { return r.Lockable && r.Limit == Limit{} }

// Result is one rule's verdict on one request.
type Result struct {
	// Name is the rule's name.
	Name string
	// Limit is the limit that was applied.
	Limit Limit
	// Allowed reports whether this rule admits the request.
	Allowed bool
	// Locked reports that the rule rejected because its identity is
	// locked out; RetryAfter is then the time the lock has left, or, if
	// the rule's log is full past the lock's end, the time until it has
	// room.
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
	// InFlight reports, for an admitted request, that the rule's place
	// (Rule.Place) was refused because its identity's failures counted
	// and attempts in flight reach the lockout's threshold together: no
	// place of the request was taken. RetryAfter is then the time until
	// the soonest of the attempts in flight stops counting, if none ends
	// first; a place frees as soon as an attempt ends.
	InFlight bool
	// Token names the place an admitted request holds towards the rule's
	// lockout (Rule.Place), for Store.EndAttempt; "" when it holds none
	// (no Place, the request rejected, a place of the request refused,
	// or an attempt the identity already failed with).
	Token string
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
	// takeBackFailed, when set, hears each take-back that failed (see
	// OnTakeBackFailure).
	takeBackFailed func(rule string, err error)
}

// OnTakeBackFailure makes l call fn for each admission it could not take
// back: on a Redis Cluster, a decision whose rules live in different slots
// is decided slot by slot, and when one slot rejects, the admissions the
// others made are taken back. One that fails (a timeout, a node lost)
// counts against its rule, the name given to fn, until it leaves the
// window: the limit is then stricter than it should be, never looser. fn
// must be safe for concurrent use and must not block; call this before l
// is used.
func (l *Limiter) OnTakeBackFailure(fn func(rule string, err error)) {
	l.takeBackFailed = fn
}

// RememberRejections makes l remember, for at most ttl, that a rule Redis
// said was full (or locked) still is, and reject requests for it without a
// round trip (at most maxKeys rules are remembered). This never admits a
// request Redis would reject; it can keep rejecting up to ttl after an
// entry was taken back, a rule Reset, or an identity unlocked by another
// process (Forget covers this one). A lock-only rule is answered only by
// a lock-only rule's rejection (one of the rule's limit is no lock), and
// a rule with a limit only by one of a rule with a limit. Call it before
// l is used; ttl <= 0 leaves every decision to Redis.
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
	var results [1]Result
	d, err := l.decide(ctx, []Rule{rule}, results[:])
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
	return l.decide(ctx, rules, make([]Result, len(rules)))
}

// decide is AllowAll, with each rule's result written into results (as
// long as rules).
func (l *Limiter) decide(ctx context.Context, rules []Rule, results []Result) (Decision, error) {
	return l.decideWith(ctx, rules, nil, results)
}

// decideWith is decide for a store whose lockouts, by rule name, the
// rules' places (Rule.Place) count towards; a Limiter alone has none, and
// refuses a rule with a place.
func (l *Limiter) decideWith(ctx context.Context, rules []Rule, lockouts map[string]*Lockouts, results []Result) (Decision, error) {
	if err := validRules(rules); err != nil {
		return Decision{}, err
	}
	placing := hasPlaces(rules)
	if placing {
		for _, r := range rules {
			if r.Place != nil && lockouts[r.Name] == nil {
				return Decision{}, noLockouts(r.Name)
			}
		}
	}
	var asked uint64
	if l.rejections != nil {
		if d, ok := l.remembered(rules, results); ok {
			return d, nil
		}
		// Before Redis is asked: an unlock from now on keeps the answer
		// from being remembered.
		asked = l.rejections.asking()
	}
	var pl *places
	if placing {
		// Their tokens made only for a request Redis is asked about.
		pl = l.places(rules, lockouts)
	}
	keys, spec := l.input(rules)
	d := Decision{Allowed: true, Results: results}
	var err error
	if groups := l.groups(rules, keys, pl); groups == nil {
		var cmd *redis.Cmd
		if pl == nil {
			cmd = l.run(ctx, keys, &spec, nil)
		} else {
			cmd = l.run(ctx, append(keys, pl.keys...), &spec, pl.argv)
		}
		err = parseReply(rules, cmd, results, nil, pl)
		if err != nil {
			err = fmt.Errorf("ratelimit: rules %s: %w", names(rules, nil), err)
		}
	} else {
		err = l.decideGroups(ctx, rules, keys, groups, results)
	}
	for i, res := range results {
		if !res.Allowed {
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, res.RetryAfter)
			if l.rejections != nil && err == nil {
				// Its own copy: an identity may be part of a larger string.
				r := ruleID{name: strings.Clone(rules[i].Name), id: strings.Clone(rules[i].ID)}
				l.rejections.remember(r, res.RetryAfter, res.Locked, rules[i].LockOnly(), time.Now(), asked)
			}
		}
	}
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

// decideGroups decides rules split into groups, on a cluster: the scripts
// of all groups in one pipeline and, if some group rejected (or failed),
// the entries the others made taken back.
func (l *Limiter) decideGroups(ctx context.Context, rules []Rule, keys []string, groups []group, results []Result) error {
	cmds := slidingWindow.runAll(ctx, l.rdb, len(groups), func(g int) ([]string, []any) {
		gr := &groups[g]
		if gr.places == nil {
			return gr.keys, []any{gr.spec}
		}
		args := make([]any, 0, 1+len(gr.places.argv))
		args = append(args, gr.spec)
		for _, a := range gr.places.argv {
			args = append(args, a)
		}
		return slices.Concat(gr.keys, gr.places.keys), args
	})
	// Each admission's time in its log, for takeBack.
	at := make([]int64, len(rules))
	var firstErr error
	allowed := true
	for g, gr := range groups {
		sub := make([]Result, len(gr.rules))
		subAt := make([]int64, len(gr.rules))
		err := parseReply(gr.ruleList(rules), cmds[g], sub, subAt, gr.places)
		for j, i := range gr.rules {
			results[i], at[i] = sub[j], subAt[j]
			if !results[i].Allowed || err != nil {
				allowed = false
			}
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("ratelimit: rules %s: %w", names(rules, gr.rules), err)
		}
	}
	if !allowed {
		// Rejected: no place was asked for, as on one Redis.
		for i := range results {
			results[i].InFlight = false
			if results[i].Allowed {
				results[i].RetryAfter = 0
			}
		}
		l.takeBack(ctx, results, rules, keys, at, groups)
		return firstErr
	}
	if slices.ContainsFunc(results, func(r Result) bool { return r.InFlight }) {
		// A place refused in one slot: those taken in the others are
		// given back, all or none, as on one Redis.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), takeBackTimeout)
		defer cancel()
		l.givePlacesBack(ctx, results, groups)
	}
	return firstErr
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
	return l.remembered(rules, nil)
}

// remembered answers a request from the remembered rejections when one of
// its rules is among them, by the rules' names and identities: no key is
// built and no identity hashed. The other rules are not consulted: their
// results say Allowed, with no counts, and the decision says FromMemory.
// The results are written into results if it is not nil (as long as
// rules), else into a new slice.
func (l *Limiter) remembered(rules []Rule, results []Result) (Decision, bool) {
	if l.rejections == nil {
		return Decision{}, false
	}
	now := time.Now()
	var d Decision
	mem := l.rejections
	mem.mu.Lock()
	defer mem.mu.Unlock()
	for i, r := range rules {
		left, locked := mem.lookupLocked(ruleID{name: r.Name, id: r.ID}, r.LockOnly(), now)
		if left <= 0 {
			continue
		}
		if d.Results == nil {
			d.Results = results
			if d.Results == nil {
				d.Results = make([]Result, len(rules))
			}
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
// decision asks Redis: after an unlock, for instance. The decisions in
// flight meanwhile remember nothing of their answers, which Redis may
// have given before the unlock.
func (l *Limiter) Forget(name, id string) {
	if l.rejections != nil {
		l.rejections.forget(ruleID{name: name, id: id})
	}
}

// Reset forgets every request recorded for id under the rule name; this
// process also forgets a rejection it remembers for it.
func (l *Limiter) Reset(ctx context.Context, name, id string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("ratelimit: rule name %q: %w", name, err)
	}
	// Forgotten after the log is gone, so that no rejection seen in
	// between is remembered past the reset.
	defer l.Forget(name, id)
	// Sent once: sent again after a late answer, it could delete an
	// admission made in between.
	cmd := redisonce.NewCmd(ctx, "del", Keys{prefix: l.prefix, kind: name}.Log(id))
	cmd.SetFirstKeyPos(1)
	return l.rdb.Process(ctx, cmd)
}

// input returns what the script is given for valid rules: the keys it
// touches, rule by rule, each one's log (but a lock-only rule's, which has
// none) and, for a Lockable rule, then its identity's lock; and the rules
// packed (appendSpec), its ARGV[1]. Their text shares one allocation.
func (l *Limiter) input(rules []Rule) (keys []string, spec string) {
	n, size := 0, specLen*len(rules)
	for _, r := range rules {
		k := Keys{prefix: l.prefix, kind: r.Name}
		n += keysOf(r)
		if !r.LockOnly() {
			size += k.keyLen(logSuffix)
		}
		if r.Lockable {
			size += k.keyLen(lockSuffix)
		}
	}
	keys = make([]string, 0, n)
	var b strings.Builder
	b.Grow(size)
	for _, r := range rules {
		k := Keys{prefix: l.prefix, kind: r.Name}
		var d [digestLen]byte
		digest(&d, r.ID)
		// Grown once: each key is a slice of what the builder holds.
		if !r.LockOnly() {
			start := b.Len()
			k.write(&b, &d, logSuffix)
			keys = append(keys, b.String()[start:])
		}
		if r.Lockable {
			start := b.Len()
			k.write(&b, &d, lockSuffix)
			keys = append(keys, b.String()[start:])
		}
	}
	var buf [specLen]byte
	for _, r := range rules {
		b.Write(appendSpec(buf[:0], r))
	}
	return keys, b.String()[b.Len()-specLen*len(rules):]
}

// specLen is the length of one rule in the script's ARGV[1]: its limit, a
// signed 32-bit integer, and its window in microseconds, a signed 64-bit
// one, both little-endian.
const specLen = 12

// appendSpec appends rule r as the script reads it (specLen bytes): its
// limit, negated if it is lockable, and its window in microseconds,
// rounded up (cut to the microsecond below, the window would admit a
// request before its end); both 0 for a lock-only rule. Limits are at
// most MaxCount, so they fit.
func appendSpec(dst []byte, r Rule) []byte {
	limit := int32(r.Limit.Count)
	if r.Lockable {
		limit = -limit
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(limit))
	window := (r.Limit.Window + time.Microsecond - 1) / time.Microsecond
	return binary.LittleEndian.AppendUint64(dst, uint64(window))
}

// keysOf is the number of keys the script touches for rule r: its log,
// its lock, or both.
func keysOf(r Rule) int {
	switch {
	case r.LockOnly():
		return 1
	case r.Lockable:
		return 2
	}
	return 1
}

// logKey returns the key of rule i's log among keys (Limiter.keys); rule i
// is not lock-only.
func logKey(rules []Rule, keys []string, i int) string {
	k := 0
	for _, r := range rules[:i] {
		k += keysOf(r)
	}
	return keys[k]
}

// validRules reports whether rules can be decided: at least one, each
// with a valid name and limit, or lock-only. Every store checks a
// request's rules by it.
func validRules(rules []Rule) error {
	if len(rules) == 0 {
		return errors.New("ratelimit: no rules")
	}
	for i, r := range rules {
		if err := checkName(r.Name); err != nil {
			return fmt.Errorf("ratelimit: rule name %q: %w", r.Name, err)
		}
		if r.Place != nil {
			if err := validPlace(rules[:i], r); err != nil {
				return err
			}
		}
		if r.LockOnly() {
			continue
		}
		if err := r.Limit.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// validPlace reports whether rule r's place can be taken after those of
// the rules before it: on a lockable rule, for a ttl in range, and one
// place per lockout, which a request's places could otherwise pass
// together.
func validPlace(before []Rule, r Rule) error {
	if !r.Lockable {
		return fmt.Errorf("ratelimit: rule %s: a place towards a lockout needs a lockable rule", r.Name)
	}
	if err := checkTTL(r.Place.TTL); err != nil {
		return err
	}
	for _, o := range before {
		if o.Place != nil && o.Name == r.Name && o.ID == r.ID {
			return fmt.Errorf("ratelimit: rule %s: two places towards one lockout", r.Name)
		}
	}
	return nil
}

// group is rules one script decides on a cluster: those whose keys share
// a slot.
type group struct {
	// rules holds the indexes of the group's rules, in order.
	rules []int
	// keys and spec are the script's (Limiter.input).
	keys []string
	spec []byte
	// places are the places its rules take, nil for none; their rules
	// are indexes into the group's.
	places *places
}

// ruleList returns the rules of g.
func (g group) ruleList(rules []Rule) []Rule {
	out := make([]Rule, len(g.rules))
	for j, i := range g.rules {
		out[j] = rules[i]
	}
	return out
}

// groups splits a request's rules into those one script can decide
// together, on a Redis Cluster (or any client that spreads keys by hash
// slot): those whose keys share a slot. It returns nil when one script
// decides them all: on one Redis, for one rule, or when all share a slot.
func (l *Limiter) groups(rules []Rule, keys []string, pl *places) []group {
	if l.single || len(rules) == 1 {
		return nil
	}
	var out []group
	var slots []int
	// Each rule's group.
	of := make([]int, len(rules))
	k := 0
	for i, r := range rules {
		n := keysOf(r)
		s := slot(keys[k])
		j := slices.Index(slots, s)
		if j < 0 {
			slots = append(slots, s)
			out = append(out, group{})
			j = len(out) - 1
		}
		g := &out[j]
		g.rules = append(g.rules, i)
		g.keys = append(g.keys, keys[k:k+n]...)
		g.spec = appendSpec(g.spec, r)
		of[i] = j
		k += n
	}
	if len(out) == 1 {
		return nil
	}
	// A place goes with its rule, whose hash tag its keys share, under
	// the rule's index in the group.
	for j, i := range pl.rules() {
		g := &out[of[i]]
		if g.places == nil {
			g.places = &places{argv: []string{""}}
		}
		local := slices.Index(g.rules, i)
		g.places.rule = append(g.places.rule, local)
		g.places.keys = append(g.places.keys, pl.keys[3*j:3*j+3]...)
		g.places.argv = append(g.places.argv, pl.argv[1+2*j], pl.argv[2+2*j])
		var index [4]byte
		binary.LittleEndian.PutUint32(index[:], uint32(local+1))
		g.places.argv[0] += string(index[:]) + pl.argv[0][placeSpecLen*j+4:placeSpecLen*(j+1)]
	}
	return out
}

// run decides rules whose keys one script may touch together (keys and
// spec from Limiter.input), with one EVALSHA, or EVAL if Redis answered
// that it lost its script cache (a restart or failover), each a redisonce
// command (see script). Its arguments point into keys and spec, so that
// building the command boxes nothing.
func (l *Limiter) run(ctx context.Context, keys []string, spec *string, more []string) *redis.Cmd {
	args := make([]any, 4+len(keys)+len(more))
	args[0], args[1], args[2] = "evalsha", &slidingWindow.sha, len(keys)
	for i := range keys {
		args[3+i] = &keys[i]
	}
	args[3+len(keys)] = spec
	for i := range more {
		args[4+len(keys)+i] = &more[i]
	}
	cmd := redisonce.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	if err := l.rdb.Process(ctx, cmd); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = "eval", &slidingWindow.src
		cmd = redisonce.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = l.rdb.Process(ctx, cmd)
	}
	return cmd.Cmd
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
// entry leaves the window (and OnTakeBackFailure's fn hears of it).
func (l *Limiter) takeBack(ctx context.Context, results []Result, rules []Rule, keys []string, at []int64, groups []group) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), takeBackTimeout)
	defer cancel()
	l.givePlacesBack(ctx, results, groups)
	var admitted []int
	for i := range results {
		if at[i] != 0 {
			admitted = append(admitted, i)
			results[i].Count--
			results[i].Remaining++
		}
	}
	if len(admitted) == 0 {
		return
	}
	cmds := takeBack.runAll(ctx, l.rdb, len(admitted), func(j int) ([]string, []any) {
		i := admitted[j]
		return []string{logKey(rules, keys, i)}, []any{at[i]}
	})
	if l.takeBackFailed == nil {
		return
	}
	for j, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			l.takeBackFailed(rules[admitted[j]].Name, err)
		}
	}
}

// givePlacesBack ends the places that groups which admitted a request
// took (Result.Token) after another group rejected it, on a cluster, and
// clears their tokens: a place kept would hold its identity's lockout
// until its ttl ran out. Like a take-back, one that fails is heard by
// OnTakeBackFailure's fn.
func (l *Limiter) givePlacesBack(ctx context.Context, results []Result, groups []group) {
	type given struct {
		rule string
		cmd  *redis.IntCmd
	}
	var back []given
	var pipe redis.Pipeliner
	for _, g := range groups {
		if g.places == nil {
			continue
		}
		for j, local := range g.places.rule {
			res := &results[g.rules[local]]
			if res.Token == "" {
				continue
			}
			if pipe == nil {
				pipe = l.rdb.Pipeline()
			}
			back = append(back, given{res.Name, pipe.ZRem(ctx, g.places.keys[3*j+1], res.Token)})
			res.Token = ""
		}
	}
	if pipe == nil {
		return
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	if l.takeBackFailed == nil {
		return
	}
	for _, b := range back {
		if err := b.cmd.Err(); err != nil {
			l.takeBackFailed(b.rule, err)
		}
	}
}

// places is what the script is given for the places a decision's rules
// take (Rule.Place), in the order of their rules.
type places struct {
	// rule is each place's rule, by its index among the rules the script
	// decides.
	rule []int
	// keys are three for each place, the script's last: its identity's
	// failures, attempts in flight and failed attempts.
	keys []string
	// argv is the script's ARGV from its second on: the places packed
	// (placeSpecLen bytes each), then each one's token and its attempt's
	// digest.
	argv []string
}

// placeSpecLen is the length of one place in the script's ARGV[2]: its
// rule's index from 1 and its lockout's threshold, signed 32-bit
// integers, and its ttl in milliseconds, a signed 64-bit one, all
// little-endian.
const placeSpecLen = 16

// placeReplyLen is the length of one place's verdict in the script's
// answer: a byte, then a signed 64-bit wait in milliseconds.
const placeReplyLen = 9

// hasPlaces reports whether one of rules takes a place (Rule.Place).
func hasPlaces(rules []Rule) bool {
	for i := range rules {
		if rules[i].Place != nil {
			return true
		}
	}
	return false
}

// places returns the script's input for the places of valid rules,
// counted towards lockouts, by rule name, which holds each of theirs: each
// with a token of its own.
func (l *Limiter) places(rules []Rule, lockouts map[string]*Lockouts) *places {
	pl := &places{argv: []string{""}}
	var spec []byte
	for i, r := range rules {
		if r.Place == nil {
			continue
		}
		lo := lockouts[r.Name]
		pl.rule = append(pl.rule, i)
		pl.keys = append(pl.keys, lo.keys.Key(r.ID, ":failures"), lo.keys.Key(r.ID, inflightSuffix), lo.keys.Key(r.ID, ":attempts"))
		spec = appendPlace(spec, i, lo.policy.Threshold, r.Place.TTL)
		pl.argv = append(pl.argv, newAttemptToken(), attemptDigest(r.Place.Attempt))
	}
	pl.argv[0] = string(spec)
	return pl
}

// appendPlace appends the place of rule i (from 0) as the script reads it
// (placeSpecLen bytes).
func appendPlace(dst []byte, i, threshold int, ttl time.Duration) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(i+1))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(threshold))
	return binary.LittleEndian.AppendUint64(dst, uint64(ceilMillis(ttl)))
}

// len is the number of places, 0 for none.
func (pl *places) len() int {
	if pl == nil {
		return 0
	}
	return len(pl.rule)
}

// rules is each place's rule, none for nil.
func (pl *places) rules() []int {
	if pl == nil {
		return nil
	}
	return pl.rule
}

// token is place j's token.
func (pl *places) token(j int) string { return pl.argv[1+2*j] }

// parseReply reads the script's answer for rules, and their places pl
// (nil for none), into results and, when the request was admitted and at
// is not nil, the time each admission was recorded at into at. Each
// result names its rule even on error. The answer is a string: a byte, 1
// if admitted and 0 if not, then for each rule its count (32 bits) and
// value (64 bits), signed, little-endian, then for each place its verdict
// (a byte) and wait (64 bits) (see sliding_window.lua).
func parseReply(rules []Rule, cmd *redis.Cmd, results []Result, at []int64, pl *places) error {
	for i, r := range rules {
		results[i] = Result{Name: r.Name, Limit: r.Limit}
	}
	reply, err := cmd.Text()
	if err != nil {
		return err
	}
	if len(reply) != 1+specLen*len(rules)+placeReplyLen*pl.len() || reply[0] > 1 {
		return fmt.Errorf("unexpected reply %q", reply)
	}
	admitted := reply[0] == 1
	rejected := false
	for i, r := range rules {
		p := reply[1+specLen*i : 1+specLen*(i+1)]
		count := int32(le32(p[:4]))
		value := int64(le64(p[4:]))
		if count < 0 || !admitted && (value > maxWait || value < -maxWait) {
			// A wait no time.Duration holds comes only from a log
			// centuries ahead of Redis' clock, which the script never
			// writes (a garbled one): converted, it would wrap around.
			return fmt.Errorf("unexpected reply %q", reply)
		}
		res := &results[i]
		res.Count = int(count)
		res.Remaining = max(r.Limit.Count-res.Count, 0)
		switch {
		case admitted:
			res.Allowed = true
			if at != nil {
				at[i] = value
			}
		case value == 0:
			res.Allowed = true
		case value < 0:
			res.Locked, res.RetryAfter = true, time.Duration(-value)*time.Microsecond
			rejected = true
		default:
			res.RetryAfter = time.Duration(value) * time.Microsecond
			rejected = true
		}
	}
	refused := false
	for j := range pl.len() {
		p := reply[1+specLen*len(rules)+placeReplyLen*j:]
		verdict, wait := p[0], int64(le64(p[1:placeReplyLen]))
		res := &results[pl.rule[j]]
		switch {
		case admitted && verdict == 1:
			res.Token = pl.token(j)
		case admitted && (verdict == 0 || verdict == 2), !admitted && verdict == 0:
		case admitted && verdict == 3 && wait > 0 && wait <= maxWait/1000:
			res.InFlight, res.RetryAfter = true, time.Duration(wait)*time.Millisecond
			refused = true
		default:
			return fmt.Errorf("unexpected reply %q", reply)
		}
	}
	if refused {
		// All or none: a place given with one refused was not taken.
		for _, i := range pl.rules() {
			results[i].Token = ""
		}
	}
	if !admitted && !rejected {
		// Not admitted, yet no rule says why: every result would read
		// Allowed for a request Redis did not record.
		return fmt.Errorf("unexpected reply %q: rejected by no rule", reply)
	}
	return nil
}

// maxWait bounds a wait in the script's answer, in microseconds: what a
// time.Duration holds, with a second to spare for RetryAfterSeconds to
// round up.
const maxWait = (math.MaxInt64 - int64(time.Second)) / int64(time.Microsecond)

// le32 and le64 read little-endian numbers from the script's answer.
func le32(s string) uint32 {
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

func le64(s string) uint64 {
	return uint64(le32(s[:4])) | uint64(le32(s[4:8]))<<32
}

// names lists the names of rules, of those of group if it is not nil, for
// an error.
func names(rules []Rule, group []int) string {
	var s []string
	for i, r := range rules {
		if group == nil || slices.Contains(group, i) {
			s = append(s, r.Name)
		}
	}
	return strings.Join(s, ", ")
}
