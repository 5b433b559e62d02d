package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// The in-process store before it was sharded with an LRU order, kept here
// only to be measured against: one lock for the whole process, and a full
// sweep of every log for each new identity once the bound is reached.

type globalLocal struct {
	mu       sync.Mutex
	now      func() time.Time
	max      int
	logs     map[string]*globalLog
	failures map[string]*globalLockout
	policy   LockoutPolicy
	name     string // the lockouts' rule name
}

type globalLog struct {
	times  []time.Time // admission times, oldest first
	window time.Duration
}

type globalLockout struct {
	failures int
	level    int
	until    time.Time // zero: not locked
	last     time.Time // last failure or lock end, for Memory
}

func newGlobalLocal(name string, p LockoutPolicy, maxIdentities int) *globalLocal {
	if p.Memory == 0 {
		p.Memory = p.MaxDuration
	}
	return &globalLocal{now: time.Now, max: maxIdentities, logs: map[string]*globalLog{}, failures: map[string]*globalLockout{}, policy: p, name: name}
}

// AllowAll checks a request against every rule and records it in all of
// them only if all admit it.
func (l *globalLocal) AllowAll(_ context.Context, rules ...Rule) (Decision, error) {
	if err := validRules(rules); err != nil {
		return Decision{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	d := Decision{Allowed: true, Results: make([]Result, len(rules))}
	logs := make([]*globalLog, len(rules))
	for i, r := range rules {
		res := Result{Name: r.Name, Limit: r.Limit}
		key := r.Name + "\x00" + r.ID
		log := l.logs[key]
		if log == nil {
			log = l.newLog(key, r.Limit.Window, now)
		}
		logs[i] = log
		count := 0
		if log != nil {
			log.trim(now)
			count = len(log.times)
		}
		res.Count = count
		switch {
		case r.Lockable && l.globalLockedFor(r.ID, now) > 0:
			res.Locked, res.RetryAfter = true, l.globalLockedFor(r.ID, now)
		case log == nil:
			// Full of live identities: a new one waits.
			res.RetryAfter = time.Second
		case count >= r.Limit.Count:
			res.RetryAfter = log.times[count-r.Limit.Count].Add(r.Limit.Window).Sub(now)
		default:
			res.Allowed = true
		}
		res.Remaining = max(r.Limit.Count-count, 0)
		if !res.Allowed {
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, res.RetryAfter)
		}
		d.Results[i] = res
	}
	if !d.Allowed {
		return d, nil
	}
	for i := range rules {
		logs[i].times = append(logs[i].times, now)
		d.Results[i].Count++
		d.Results[i].Remaining--
	}
	return d, nil
}

// newLog makes room for and returns a new log, or nil when the bound is
// reached by live logs.
func (l *globalLocal) newLog(key string, window time.Duration, now time.Time) *globalLog {
	if len(l.logs) >= l.max {
		for k, log := range l.logs {
			if log.trim(now); len(log.times) == 0 {
				delete(l.logs, k)
			}
		}
		if len(l.logs) >= l.max {
			return nil
		}
	}
	log := &globalLog{window: window}
	l.logs[key] = log
	return log
}

func (log *globalLog) trim(now time.Time) {
	i := 0
	for i < len(log.times) && !now.Before(log.times[i].Add(log.window)) {
		i++
	}
	log.times = log.times[i:]
}

func (l *globalLocal) globalLockedFor(id string, now time.Time) time.Duration {
	f := l.failures[id]
	if f == nil || !now.Before(f.until) {
		return 0
	}
	return f.until.Sub(now)
}

// Fail records a failed attempt for id, as Lockouts.Fail does.
func (l *globalLocal) Fail(_ context.Context, _, id, _ string) (Failure, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.failures[id]
	if f == nil {
		if len(l.failures) >= l.max {
			l.sweepFailures(now)
		}
		f = &globalLockout{}
		l.failures[id] = f
	}
	if left := l.globalLockedFor(id, now); left > 0 {
		return Failure{Level: f.level, LockedFor: left}, nil
	}
	if !f.last.IsZero() && now.Sub(f.last) > l.policy.Memory {
		f.failures, f.level = 0, 0
	}
	f.last = now
	f.failures++
	if f.failures < l.policy.Threshold {
		return Failure{Failures: f.failures, Level: f.level}, nil
	}
	n := f.failures
	f.level++
	d := l.policy.Duration << min(f.level-1, 40)
	if d > l.policy.MaxDuration || d <= 0 {
		d = l.policy.MaxDuration
	}
	f.until, f.failures, f.last = now.Add(d), 0, now.Add(d)
	return Failure{LockedNow: true, Failures: n, Level: f.level, LockedFor: d}, nil
}

func (l *globalLocal) sweepFailures(now time.Time) {
	for id, f := range l.failures {
		if now.Sub(f.last) > l.policy.Memory && !now.Before(f.until) {
			delete(l.failures, id)
		}
	}
}

// Clear ends id's lock and forgets its failures, keeping the level.
func (l *globalLocal) Clear(_ context.Context, _, id string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.failures[id]
	if f == nil {
		return false, nil
	}
	was := l.now().Before(f.until)
	f.until, f.failures = time.Time{}, 0
	return was, nil
}

// localStore is what the benchmark drives: the old store or the new.
type localStore interface {
	AllowAll(ctx context.Context, rules ...Rule) (Decision, error)
	Fail(ctx context.Context, name, id, attempt string) (Failure, error)
}

// BenchmarkLocalStore measures sign-in decisions per second of the old
// and the new in-process store under parallel load: each decision checks
// a client network's rule and an account's Lockable rule, and one in ten
// records a failure. "within" spreads the load over 20,000 networks and
// accounts (40,000 logs, below the 100,000 bound); "past" over 2,000,000,
// so that new identities keep arriving at a full store. The two stores run one after
// the other inside each repetition, so -count interleaves them.
func BenchmarkLocalStore(b *testing.B) {
	p := LockoutPolicy{Threshold: 10, Duration: 15 * time.Minute, MaxDuration: 24 * time.Hour}
	for _, spread := range []struct {
		name       string
		identities int
	}{{"within", 20_000}, {"past", 2_000_000}} {
		stores := []struct {
			name string
			make func() localStore
		}{
			{"old", func() localStore { return newGlobalLocal("login_account", p, DefaultLocalIdentities) }},
			{"new", func() localStore {
				l, err := NewLocal(map[string]LockoutPolicy{"login_account": p}, DefaultLocalIdentities, nil)
				if err != nil {
					b.Fatal(err)
				}
				return l
			}},
		}
		for range 3 {
			for _, st := range stores {
				b.Run(fmt.Sprintf("%s/%s", spread.name, st.name), func(b *testing.B) {
					s := st.make()
					ip := Limit{Count: 50, Window: 10 * time.Minute}
					acct := Limit{Count: 10, Window: 10 * time.Minute}
					if spread.identities > DefaultLocalIdentities {
						// Full before the clock starts, so that every
						// measured decision meets a full store.
						for i := range DefaultLocalIdentities {
							_, _ = s.AllowAll(context.Background(), Rule{Name: "login_ip", ID: fmt.Sprint("fill", i), Limit: ip})
						}
					}
					var seq sync.Mutex
					seeds := uint64(0)
					b.SetParallelism(8)
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						seq.Lock()
						seeds++
						r := rand.New(rand.NewPCG(seeds, 7))
						seq.Unlock()
						ctx := context.Background()
						for pb.Next() {
							n := r.IntN(spread.identities)
							rules := []Rule{
								{Name: "login_ip", ID: fmt.Sprint("net", n), Limit: ip},
								{Name: "login_account", ID: fmt.Sprint("acct", n), Limit: acct, Lockable: true},
							}
							if _, err := s.AllowAll(ctx, rules...); err != nil {
								b.Error(err)
								return
							}
							if n%10 == 0 {
								_, _ = s.Fail(ctx, "login_account", rules[1].ID, "")
							}
						}
					})
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				})
			}
		}
	}
}
