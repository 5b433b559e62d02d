package counters

import (
	"cmp"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/internal/redisonce"
	"github.com/xcloak/xcloak/ratelimit"
)

// Counter names in a minute's (and an hour's) hash.
const (
	counterAttempts  = "attempts"  // sign-in requests received, rejected ones included
	counterSuccesses = "successes" // sign-ins that succeeded
	counterFailures  = "failures"  // wrong password or unknown account
	counterInvalid   = "invalid"   // malformed sign-in requests
	// counterUnavailable: sign-ins answered 503 because a store or the
	// hashing pool was unavailable.
	counterUnavailable = "unavailable"
	counterLockouts    = "lockouts" // accounts locked
	counterResets      = "resets"   // reset requests accepted
	// counterMailsDropped: reset mails of accepted requests not sent.
	counterMailsDropped = "mails_dropped"
	// counterWebhooksDropped: webhook deliveries dropped unsent
	// (CountWebhooksDropped).
	counterWebhooksDropped = "webhooks_dropped"
	// counterRejectedPrefix + rule name: requests rejected by that rule
	// (see RejectionRules).
	counterRejectedPrefix = "rejected:"
	// counterAppPrefix + application name + ":" + one of the appCounter
	// names: the decision API's figures of one application (an API key's
	// name, which holds no ':'). Only holders of a key add names, so the
	// fields stay few.
	counterAppPrefix = "app:"
)

// The figures of one application, after counterAppPrefix and its name.
const (
	appAttempts  = "attempts"  // decisions asked for, denied ones included
	appDenied    = "denied"    // decisions denied by a limit or a lockout
	appFailures  = "failures"  // sign-ins reported failed
	appSuccesses = "successes" // sign-ins reported succeeded
)

// appCounters are the figures an application's event adds to.
func appCounters(kind string) []string {
	switch kind {
	case auth.EventAttemptAllowed, auth.EventResetRequested:
		return []string{appAttempts}
	case auth.EventLoginRejected, auth.EventResetRejected:
		return []string{appAttempts, appDenied}
	case auth.EventLoginFailed:
		return []string{appFailures}
	case auth.EventLoginSucceeded:
		return []string{appSuccesses}
	}
	return nil
}

// Stats are the counters in Redis behind the dashboard, written by the
// Recorder and read by every replica alike.
//
// Each minute has a hash of counters ("<tag>:m:<unix minute>") and two
// sorted sets: the sources of rejected requests ("<tag>:src:<minute>")
// and the accounts of failed or rejected ones ("<tag>:acct:<minute>").
// Each clock hour has the same three keys with ":h:<unix hour>", written in
// the same transaction, so a period's sums read whole hours from one key
// and only the ragged ends minute by minute: at most about 140 reads for
// 24 hours instead of 1440.
//
// Sums of counters are exact over any period. The sorted sets are for
// ranking: minute sets are kept for rankRetention (the 5-minute and 1-hour
// lists use them), and the 24-hour lists union whole hours, so they reach
// back to the start of the hour 24 hours ago. Under a flood from more
// distinct sources than a set's cap, a source new to a full set takes the
// place of the lowest, with its count (Space-Saving, rank.lua), which
// keeps memory bounded and every source whose count passes the set's
// total over its cap in the set, however its count is spread over
// batches; a count is then over the source's own by at most what it
// inherited.
//
// A ranking is the sum of its period's sets, merged in Go from the sets
// read whole, a few per round trip: no command holds Redis longer than one
// capped set takes to read (under a millisecond), where one ZUNIONSTORE of
// a flood's hour (60,000 members) held every sign-in's limit script up
// for about 100 ms. Each merged ranking is kept in Redis for rankingFresh
// under the period's last minute ("<tag>:top:<kind>:<period minutes>:<n>:
// <unix minute>"), merged by one replica at a time (a lock beside it):
// every replica's dashboard reads it, so a ranking may leave out up to
// rankingFresh of the newest counts of its current minute, and is exact
// for every minute before.
//
// All keys are built by ratelimit.Keys as the records of one identity,
// the dashboard, so they share one hash tag: one transaction can read or
// write any of them on a Redis Cluster too. Every key expires.
//
// Each Stats numbers the batches it counts and keeps the number of the
// newest one Redis counted under a key of its own ("<tag>:batch:<random>"),
// so that a batch given again after a failure is counted once
// (CountEvents).
type Stats struct {
	rdb  redis.UniversalClient
	keys ratelimit.Keys
	// counted is the key of the number of the newest batch counted.
	counted string
	seed    maphash.Seed

	// mu orders the batches. last is the number of the newest; unsure,
	// when its n is not 0, the batch the last CountEvents failed with,
	// which Redis may have counted, and its fingerprint.
	mu     sync.Mutex
	last   int64
	unsure struct {
		n   int64
		sum uint64
	}

	// droppedMark is the key of how many webhook drops this Stats has
	// counted in all, and dropped that number as far as it knows it
	// (CountWebhooksDropped), under dropMu.
	droppedMark string
	dropMu      sync.Mutex
	dropped     int64
}

// Retention and caps of the stats keys.
const (
	// statsRetention covers the dashboard's longest period (24 h) and a
	// margin; it applies to counters and to the hourly sorted sets.
	statsRetention = 25 * time.Hour
	// rankRetention covers the periods that rank by the minute (up to 1 h).
	rankRetention = 2 * time.Hour
	// minuteRankCap and hourRankCap bound the members of one sorted set.
	minuteRankCap = 1000
	hourRankCap   = 2000
)

// How rankings are read (Stats.top).
const (
	// rankingFresh is how long a merged ranking is kept for every
	// replica, and how long the replica merging it holds its lock: the
	// live dashboard asks for each watched period every second on every
	// replica, and merging a flood's hour costs Redis some 60,000
	// members read.
	rankingFresh = 2 * time.Second
	// rankingWait is how long a replica waits for the ranking another is
	// merging, polling every rankingPoll, before it merges on its own.
	rankingWait = time.Second
	rankingPoll = 20 * time.Millisecond
	// rankingSetsPerTrip is how many sorted sets one round trip reads:
	// Redis runs a client's pipelined commands back to back, so a few
	// (each at most a capped set, under a millisecond) per trip.
	rankingSetsPerTrip = 4
)

// New returns the counters under prefix, the deployment's Redis key
// namespace (see ratelimit.NewKeys).
func New(rdb redis.UniversalClient, prefix string) (*Stats, error) {
	keys, err := ratelimit.NewKeys(prefix, "stats")
	if err != nil {
		return nil, err
	}
	id := rand.Text()
	return &Stats{rdb: rdb, keys: keys, counted: keys.Key(dashboardID, ":batch:"+id),
		droppedMark: keys.Key(dashboardID, ":whdropped:"+id), seed: maphash.MakeSeed()}, nil
}

// dashboardID is the one identity the counters' keys belong to.
const dashboardID = "dashboard"

// TopKind names a ranking.
type TopKind string

// The rankings Stats keeps.
const (
	// TopSources ranks client networks by rejected requests.
	TopSources TopKind = "src"
	// TopAccounts ranks account identifiers by failed and rejected
	// requests: the accounts under attack.
	TopAccounts TopKind = "acct"
)

// Summary returns the headline figures of period p ending at now.
func (s *Stats) Summary(ctx context.Context, p dashboard.Period, now time.Time) (dashboard.Summary, error) {
	if !p.Valid() {
		return dashboard.Summary{}, dashboard.ErrInvalidPeriod
	}
	var collect func() (dashboard.Summary, error)
	if err := s.read(ctx, func(pipe redis.Pipeliner) { collect = s.queueSummary(ctx, pipe, p, now) }); err != nil {
		return dashboard.Summary{}, err
	}
	return collect()
}

// Series returns the last minutes minutes up to now, oldest first, for
// the chart.
func (s *Stats) Series(ctx context.Context, minutes int, now time.Time) ([]dashboard.Minute, error) {
	if minutes < 1 || minutes > int(dashboard.Period24h) {
		return nil, fmt.Errorf("%w: series of %d minutes", auth.ErrInvalidRequest, minutes)
	}
	var collect func() ([]dashboard.Minute, error)
	if err := s.read(ctx, func(pipe redis.Pipeliner) { collect = s.queueSeries(ctx, pipe, minutes, now) }); err != nil {
		return nil, err
	}
	return collect()
}

// Top returns the n highest of a ranking over period p ending at now,
// highest first; ties are ordered by name, descending, on every replica
// alike. It may be up to rankingFresh behind in the current minute (see
// Stats).
func (s *Stats) Top(ctx context.Context, p dashboard.Period, kind TopKind, n int, now time.Time) ([]dashboard.Ranked, error) {
	if !p.Valid() {
		return nil, dashboard.ErrInvalidPeriod
	}
	if kind != TopSources && kind != TopAccounts {
		return nil, fmt.Errorf("%w: ranking %q", auth.ErrInvalidRequest, kind)
	}
	return s.top(ctx, p, kind, n, now)
}

// Snapshot returns the summary of p, the chart's series and both rankings
// (topN each). The summary and the series are one consistent read; the
// rankings are read after it, each as Top reads it.
func (s *Stats) Snapshot(ctx context.Context, p dashboard.Period, now time.Time, topN int) (dashboard.Snapshot, error) {
	if !p.Valid() {
		return dashboard.Snapshot{}, dashboard.ErrInvalidPeriod
	}
	var (
		summary func() (dashboard.Summary, error)
		series  func() ([]dashboard.Minute, error)
	)
	err := s.read(ctx, func(pipe redis.Pipeliner) {
		summary = s.queueSummary(ctx, pipe, p, now)
		series = s.queueSeries(ctx, pipe, dashboard.SeriesMinutes, now)
	})
	if err != nil {
		return dashboard.Snapshot{}, err
	}
	var snap dashboard.Snapshot
	if snap.Summary, err = summary(); err != nil {
		return dashboard.Snapshot{}, err
	}
	if snap.Series, err = series(); err != nil {
		return dashboard.Snapshot{}, err
	}
	if snap.TopSources, err = s.top(ctx, p, TopSources, topN, now); err != nil {
		return dashboard.Snapshot{}, err
	}
	if snap.TopAccounts, err = s.top(ctx, p, TopAccounts, topN, now); err != nil {
		return dashboard.Snapshot{}, err
	}
	return snap, nil
}

// read runs the commands queue adds in one MULTI/EXEC, so that no batch
// of events is half counted in what it reads.
func (s *Stats) read(ctx context.Context, queue func(redis.Pipeliner)) error {
	_, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		queue(pipe)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading stats: %w", err)
	}
	return nil
}

func unixMinute(t time.Time) int64 { return t.Unix() / 60 }

// window is the first and last minute of p ending at now.
func window(p dashboard.Period, now time.Time) (first, last int64) {
	last = unixMinute(now)
	return last - int64(p) + 1, last
}

// span splits minutes [first, last] into the whole clock hours inside it
// and the minutes left over, so that their keys together hold exactly
// those minutes.
func span(first, last int64) (minutes, hours []int64) {
	for m := first; m <= last; {
		if m%60 == 0 && m+59 <= last {
			hours = append(hours, m/60)
			m += 60
			continue
		}
		minutes = append(minutes, m)
		m++
	}
	return minutes, hours
}

func (s *Stats) minuteKey(kind string, minute int64) string {
	return s.keys.Key(dashboardID, ":"+kind+":"+strconv.FormatInt(minute, 10))
}

func (s *Stats) hourKey(kind string, hour int64) string {
	return s.keys.Key(dashboardID, ":"+kind+":h:"+strconv.FormatInt(hour, 10))
}

func (s *Stats) queueSummary(ctx context.Context, pipe redis.Pipeliner, p dashboard.Period, now time.Time) func() (dashboard.Summary, error) {
	first, last := window(p, now)
	minutes, hours := span(first, last)
	cmds := make([]*redis.MapStringStringCmd, 0, len(minutes)+len(hours))
	for _, m := range minutes {
		cmds = append(cmds, pipe.HGetAll(ctx, s.minuteKey("m", m)))
	}
	for _, h := range hours {
		cmds = append(cmds, pipe.HGetAll(ctx, s.hourKey("m", h)))
	}
	return func() (dashboard.Summary, error) {
		totals := map[string]int64{}
		for _, c := range cmds {
			for k, v := range c.Val() {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return dashboard.Summary{}, fmt.Errorf("stats counter %s in %s is %q, not a number", k, c.Args()[1], v)
				}
				totals[k] += n
			}
		}
		sum := dashboard.Summary{
			Period:          p,
			From:            time.Unix(first*60, 0).UTC(),
			To:              time.Unix((last+1)*60, 0).UTC(),
			Attempts:        totals[counterAttempts],
			Successes:       totals[counterSuccesses],
			Failures:        totals[counterFailures],
			Invalid:         totals[counterInvalid],
			Unavailable:     totals[counterUnavailable],
			Lockouts:        totals[counterLockouts],
			ResetRequests:   totals[counterResets],
			MailsDropped:    totals[counterMailsDropped],
			WebhooksDropped: totals[counterWebhooksDropped],
			RejectedByRule:  map[string]int64{},
		}
		for _, r := range auth.RejectionRules() {
			sum.RejectedByRule[r] = 0
		}
		sum.Applications = applications(totals)
		for k, n := range totals {
			if rule, ok := strings.CutPrefix(k, counterRejectedPrefix); ok {
				sum.RejectedByRule[rule] = n
				if auth.IsSignInRule(rule) {
					sum.Rejected += n
				}
			}
		}
		return sum, nil
	}
}

func (s *Stats) queueSeries(ctx context.Context, pipe redis.Pipeliner, minutes int, now time.Time) func() ([]dashboard.Minute, error) {
	last := unixMinute(now)
	fields := []string{counterAttempts}
	// Every sign-in rule, listed on the dashboard or not, as the
	// summary's Rejected counts them.
	for _, r := range auth.SignInRules() {
		fields = append(fields, counterRejectedPrefix+r)
	}
	cmds := make([]*redis.SliceCmd, minutes)
	for i := range cmds {
		cmds[i] = pipe.HMGet(ctx, s.minuteKey("m", last-int64(minutes-1-i)), fields...)
	}
	return func() ([]dashboard.Minute, error) {
		out := make([]dashboard.Minute, minutes)
		for i, c := range cmds {
			m := dashboard.Minute{Start: time.Unix((last-int64(minutes-1-i))*60, 0).UTC()}
			for j, v := range c.Val() {
				if v == nil {
					continue
				}
				n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("stats counter %s in %s is %q, not a number", fields[j], c.Args()[1], v)
				}
				if j == 0 {
					m.Attempts = n
				} else {
					m.Rejected += n
				}
			}
			out[i] = m
		}
		return out, nil
	}
}

// rankingKeys are the sorted sets whose sum is the ranking kind over p
// ending at now: its minutes up to an hour, else its clock hours.
func (s *Stats) rankingKeys(p dashboard.Period, kind TopKind, now time.Time) []string {
	first, last := window(p, now)
	var keys []string
	if p <= dashboard.Period1h {
		for m := first; m <= last; m++ {
			keys = append(keys, s.minuteKey(string(kind), m))
		}
	} else {
		for h := first / 60; h <= last/60; h++ {
			keys = append(keys, s.hourKey(string(kind), h))
		}
	}
	return keys
}

// top returns the n highest of a ranking over p ending at now, from the
// copy kept for rankingFresh if there is one, else merged and kept for
// the replicas that ask next. One replica at a time merges a ranking (the
// one that takes its lock); the others wait for its copy, or merge on
// their own if it is slow to come, so that a replica that failed delays
// the dashboard but never empties it.
func (s *Stats) top(ctx context.Context, p dashboard.Period, kind TopKind, n int, now time.Time) ([]dashboard.Ranked, error) {
	if n < 1 {
		return nil, nil
	}
	name := ":top:" + string(kind) + ":" + strconv.Itoa(int(p)) + ":" + strconv.Itoa(n) + ":" + strconv.FormatInt(unixMinute(now), 10)
	kept, lock := s.keys.Key(dashboardID, name), s.keys.Key(dashboardID, name+":lock")
	deadline := time.Now().Add(rankingWait)
	for {
		out, ok, unreadable, err := s.keptRanking(ctx, kept)
		if err != nil || ok {
			return out, err
		}
		if unreadable {
			// Kept by a replica of another version: no copy this one
			// can read will come, so it merges now.
			break
		}
		won, err := s.rdb.SetNX(ctx, lock, 1, rankingFresh).Result()
		if err != nil {
			return nil, fmt.Errorf("reading stats: %w", err)
		}
		if won || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading stats: %w", ctx.Err())
		case <-time.After(rankingPoll):
		}
	}
	out, err := s.mergeRanking(ctx, s.rankingKeys(p, kind, now), n)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("keeping a ranking: %w", err)
	}
	if err := s.rdb.Set(ctx, kept, b, rankingFresh).Err(); err != nil {
		return nil, fmt.Errorf("keeping a ranking: %w", err)
	}
	return out, nil
}

// keptRanking reads a ranking top kept; ok is false if there is none.
// unreadable says there is one this replica cannot read: a replica of
// another version, during a rolling upgrade, may keep its copy in another
// form, which is merged again rather than answered as an error.
func (s *Stats) keptRanking(ctx context.Context, key string) (out []dashboard.Ranked, ok, unreadable bool, err error) {
	b, err := s.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, fmt.Errorf("reading stats: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, false, true, nil
	}
	return out, true, false, nil
}

// mergeRanking sums the sorted sets keys in Go and returns the n highest,
// highest first, ties ordered by name descending, as ZUNIONSTORE and
// ZREVRANGE would. Each set is read whole by one ZRANGE, consistent with
// itself, and at most rankingSetsPerTrip in one round trip, never in a
// transaction: no command holds Redis longer than reading one capped set
// (hourRankCap members), and the sign-ins' limit scripts run between
// them. Sets are capped, so a set read whole is never large.
func (s *Stats) mergeRanking(ctx context.Context, keys []string, n int) ([]dashboard.Ranked, error) {
	sums := map[string]float64{}
	for chunk := range slices.Chunk(keys, rankingSetsPerTrip) {
		cmds := make([]*redis.ZSliceCmd, len(chunk))
		_, err := s.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for i, k := range chunk {
				cmds[i] = pipe.ZRangeWithScores(ctx, k, 0, -1)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading stats: %w", err)
		}
		for _, c := range cmds {
			for _, z := range c.Val() {
				member, ok := z.Member.(string)
				if !ok {
					member = fmt.Sprint(z.Member)
				}
				sums[member] += z.Score
			}
		}
	}
	out := make([]dashboard.Ranked, 0, len(sums))
	for name, c := range sums {
		out = append(out, dashboard.Ranked{Name: name, Count: int64(c)})
	}
	slices.SortFunc(out, func(a, b dashboard.Ranked) int {
		if a.Count != b.Count {
			return cmp.Compare(b.Count, a.Count)
		}
		return strings.Compare(b.Name, a.Name)
	})
	return out[:min(n, len(out))], nil
}

// rejectedCounters are the counters of rejections by the table's rules
// and the lockout, named once: a flood's rejections would otherwise each
// build their counter's name.
var rejectedCounters = func() map[string]string {
	m := map[string]string{auth.RuleLockout: counterRejectedPrefix + auth.RuleLockout}
	for _, r := range auth.Rules() {
		m[r.Name] = counterRejectedPrefix + r.Name
	}
	return m
}()

// rejectedCounter is the counter of the rejections by rule.
func rejectedCounter(rule string) string {
	if c, ok := rejectedCounters[rule]; ok {
		return c
	}
	return counterRejectedPrefix + rule
}

// CountEvents counts a batch of events, once, in one transaction. If it
// fails, Redis may have counted the batch (only its answer lost) or not:
// given the same batch again, and no other first, as the Recorder does,
// CountEvents counts it only if it was not. The transaction sets the
// batch's number first, and Redis runs the rest of it past a write that
// fails (a key of the wrong type): such a batch is counted once, but for
// that write.
func (s *Stats) CountEvents(ctx context.Context, batch []auth.Event) error {
	buckets := tally(batch)
	if len(buckets) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := s.fingerprint(batch)
	n := s.unsure.n
	if n == 0 || s.unsure.sum != sum {
		s.last++
		n = s.last
	}
	if err := s.countOnce(ctx, n, func(pipe redis.Pipeliner) { s.queueCounts(ctx, pipe, buckets) }); err != nil {
		s.unsure.n, s.unsure.sum = n, sum
		return err
	}
	s.unsure.n = 0
	return nil
}

// countOnce runs the writes queue adds in a transaction numbered n, unless
// Redis has counted batch n or a later one. The number is watched, so
// that of two sends of one batch (one given up on, still on its way) only
// the first Redis runs counts.
func (s *Stats) countOnce(ctx context.Context, n int64, queue func(redis.Pipeliner)) error {
	var err error
	for range 3 { // a transaction aborted by one of its own earlier sends
		err = s.rdb.Watch(ctx, func(tx *redis.Tx) error {
			counted, err := tx.Get(ctx, s.counted).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			if counted >= n {
				return nil
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				// A command go-redis never sends again holds the whole
				// transaction to one send.
				_ = pipe.Process(ctx, redisonce.NewCmd(ctx, "set", s.counted, n, "px", statsRetention.Milliseconds()))
				queue(pipe)
				return nil
			})
			return err
		}, s.counted)
		if !errors.Is(err, redis.TxFailedErr) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("counting events: %w", err)
	}
	return nil
}

// fingerprint identifies a batch by what CountEvents counts of it.
func (s *Stats) fingerprint(batch []auth.Event) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	for _, e := range batch {
		maphash.WriteComparable(&h, e.At.UnixNano())
		for _, v := range [...]string{e.Kind, e.Account, e.Source, e.Rule, e.Detail["app"]} {
			h.WriteString(v)
			h.WriteByte(0)
		}
	}
	return h.Sum64()
}

// bucket is what a batch adds to one minute.
type bucket struct {
	counters map[string]int64
	sources  map[string]float64
	accounts map[string]float64
}

// tally sums a batch by minute; minutes it adds nothing to are left out.
func tally(batch []auth.Event) map[int64]*bucket {
	buckets := map[int64]*bucket{}
	for _, e := range batch {
		m := unixMinute(e.At)
		b := buckets[m]
		if b == nil {
			b = &bucket{counters: map[string]int64{}, sources: map[string]float64{}, accounts: map[string]float64{}}
			buckets[m] = b
		}
		rejected := false
		switch e.Kind {
		case auth.EventLoginSucceeded:
			b.counters[counterAttempts]++
			b.counters[counterSuccesses]++
		case auth.EventLoginFailed:
			b.counters[counterAttempts]++
			b.counters[counterFailures]++
			if e.Account != "" {
				b.accounts[e.Account]++
			}
		case auth.EventLoginInvalid:
			b.counters[counterAttempts]++
			b.counters[counterInvalid]++
		case auth.EventLoginUnavailable:
			b.counters[counterAttempts]++
			b.counters[counterUnavailable]++
		case auth.EventLoginRejected:
			b.counters[counterAttempts]++
			rejected = true
		case auth.EventVerificationRequired:
			// A right password held for new-device verification: an
			// attempt, neither a success nor a failure.
			b.counters[counterAttempts]++
		case auth.EventResetRejected, auth.EventUnlockRejected, auth.EventVerificationRejected:
			rejected = true
		case auth.EventLockout:
			b.counters[counterLockouts]++
		case auth.EventResetRequested:
			b.counters[counterResets]++
		case auth.EventResetMailDropped:
			b.counters[counterMailsDropped]++
		}
		if app := e.Detail["app"]; app != "" {
			for _, c := range appCounters(e.Kind) {
				b.counters[counterAppPrefix+app+":"+c]++
			}
		}
		if rejected {
			b.counters[rejectedCounter(e.Rule)]++
			if e.Source != "" {
				b.sources[e.Source]++
			}
			if e.Account != "" {
				b.accounts[e.Account]++
			}
		}
	}
	for m, b := range buckets {
		if len(b.counters) == 0 && len(b.sources) == 0 && len(b.accounts) == 0 {
			delete(buckets, m)
		}
	}
	return buckets
}

// queueCounts queues the writes of buckets in pipe.
func (s *Stats) queueCounts(ctx context.Context, pipe redis.Pipeliner, buckets map[int64]*bucket) {
	for m, b := range buckets {
		if len(b.counters) > 0 {
			for _, k := range []string{s.minuteKey("m", m), s.hourKey("m", m/60)} {
				for c, n := range b.counters {
					pipe.HIncrBy(ctx, k, c, n)
				}
				pipe.Expire(ctx, k, statsRetention)
			}
		}
		for kind, set := range map[TopKind]map[string]float64{TopSources: b.sources, TopAccounts: b.accounts} {
			if len(set) == 0 {
				continue
			}
			members := heaviestFirst(set)
			for _, k := range []struct {
				key       string
				cap       int64
				retention time.Duration
			}{
				{s.minuteKey(string(kind), m), minuteRankCap, rankRetention},
				{s.hourKey(string(kind), m/60), hourRankCap, statsRetention},
			} {
				args := make([]any, 0, 2+2*len(members))
				args = append(args, k.cap, k.retention.Milliseconds())
				for _, m := range members {
					args = append(args, m.name, m.n)
				}
				pipe.Eval(ctx, rankLua, []string{k.key}, args...)
			}
		}
	}
}

// rankLua adds a batch's counts to a capped ranking (rank.lua). It goes
// by EVAL: within the transaction, a script Redis no longer holds would
// fail alone, and the rest of the batch be counted without it.
//
//go:embed rank.lua
var rankLua string

// counted is a member of a ranking and its count in a batch.
type counted struct {
	name string
	n    float64
}

// heaviestFirst returns set's members, the highest count first, so that
// those enter a ranking with room with their own counts (rank.lua).
func heaviestFirst(set map[string]float64) []counted {
	out := make([]counted, 0, len(set))
	for name, n := range set {
		out = append(out, counted{name, n})
	}
	slices.SortFunc(out, func(a, b counted) int {
		if a.n != b.n {
			return cmp.Compare(b.n, a.n)
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// CountWebhooksDropped adds n webhook deliveries dropped at at to the
// counters of its minute and hour (webhook.DropCounter): each replica
// adds its own, so every dashboard shows the deployment's.
//
// When it fails, Redis may have added them (only its answer lost) or not:
// given them again, with the drops since, as webhook.Sender does, it adds
// only what it had not. Redis keeps how many drops this Stats added in all
// (droppedMark), and each call brings that mark to what it knows it added
// before plus n, adding the difference, in one transaction.
func (s *Stats) CountWebhooksDropped(ctx context.Context, at time.Time, n int64) error {
	if n <= 0 {
		return nil
	}
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	target := s.dropped + n
	m := unixMinute(at)
	err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
		mark, err := tx.Get(ctx, s.droppedMark).Int64()
		if errors.Is(err, redis.Nil) || (err == nil && (mark < s.dropped || mark > target)) {
			// Expired (no drop for a day) or lost with Redis's data,
			// or not this Stats's count: only what it knows it added.
			mark, err = s.dropped, nil
		}
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			// Commands go-redis never sends again (internal/redisonce)
			// hold the transaction to one send.
			_ = pipe.Process(ctx, redisonce.NewCmd(ctx, "set", s.droppedMark, target, "px", statsRetention.Milliseconds()))
			if add := target - mark; add > 0 {
				for _, k := range []string{s.minuteKey("m", m), s.hourKey("m", m/60)} {
					_ = pipe.Process(ctx, redisonce.NewCmd(ctx, "hincrby", k, counterWebhooksDropped, add))
					pipe.Expire(ctx, k, statsRetention)
				}
			}
			return nil
		})
		return err
	}, s.droppedMark)
	if err != nil {
		return fmt.Errorf("counting dropped webhooks: %w", err)
	}
	s.dropped = target
	return nil
}

// applications gathers the applications' figures from a period's totals,
// the busiest first, at most dashboard.ApplicationsListed.
func applications(totals map[string]int64) []dashboard.Application {
	byName := map[string]*dashboard.Application{}
	for k, n := range totals {
		rest, ok := strings.CutPrefix(k, counterAppPrefix)
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, ':')
		if i <= 0 {
			continue
		}
		name := rest[:i]
		a := byName[name]
		if a == nil {
			a = &dashboard.Application{Name: name}
			byName[name] = a
		}
		switch rest[i+1:] {
		case appAttempts:
			a.Attempts += n
		case appDenied:
			a.Denied += n
		case appFailures:
			a.Failures += n
		case appSuccesses:
			a.Successes += n
		}
	}
	out := make([]dashboard.Application, 0, len(byName))
	for _, a := range byName {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b dashboard.Application) int {
		if a.Attempts != b.Attempts {
			return cmp.Compare(b.Attempts, a.Attempts)
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(out) > dashboard.ApplicationsListed {
		out = out[:dashboard.ApplicationsListed]
	}
	return out
}
