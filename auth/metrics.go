package auth

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus metrics. They count what this
// replica decided (Prometheus sums replicas); the dashboard's counters in
// Redis are the shared, cross-replica view.
type metrics struct {
	attempts  prometheus.Counter
	successes prometheus.Counter
	failures  prometheus.Counter
	rejected  *prometheus.CounterVec
	// rejectedBy holds rejected's counter of each rule once it counted:
	// a rejection, which a flood makes many of, then finds its counter
	// without hashing its label. Filled as rules reject, so that the
	// metrics show the rules that did, as they always have.
	rejectedBy   sync.Map // rule name -> prometheus.Counter
	lockouts     prometheus.Counter
	resets       prometheus.Counter
	decision     prometheus.Histogram
	redisErrors  prometheus.Counter
	dbErrors     prometheus.Counter
	hashRunning  prometheus.GaugeFunc
	hashWaiting  prometheus.GaugeFunc
	givingWay    prometheus.GaugeFunc
	hashesGiving prometheus.GaugeFunc
	degraded     prometheus.GaugeFunc
	eventDropped prometheus.CounterFunc
	mailDropped  *prometheus.CounterVec
	held         prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, s *Service) (*metrics, error) {
	m := &metrics{
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xcloak_signin_attempts_total", Help: "Sign-in requests received, rejected and malformed ones included."}),
		successes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xcloak_signin_successes_total", Help: "Sign-ins that succeeded."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xcloak_signin_failures_total", Help: "Sign-ins that reached password checking and failed (wrong password or unknown account)."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xcloak_rejected_total", Help: "Requests rejected before any password checking, by the rule that rejected them (lockout for a locked account)."},
			[]string{"rule"}),
		lockouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xcloak_lockouts_total", Help: "Accounts locked after repeated failures."}),
		resets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xcloak_reset_requests_total", Help: "Password-reset requests accepted."}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "xcloak_limiter_decision_seconds",
			Help:    "Time to decide a request's limits (one Redis round trip, or the failure policy); not the rejections answered from memory.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		redisErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xcloak_redis_errors_total", Help: "Redis calls that failed."}),
		dbErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xcloak_postgres_errors_total", Help: "Postgres calls that failed."}),
		hashRunning: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "xcloak_hashing_running", Help: "Password hashes being computed now."},
			func() float64 { return float64(s.hasher.Stats().Running) }),
		hashWaiting: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "xcloak_hashing_waiting", Help: "Sign-ins waiting for a hashing slot."},
			func() float64 { return float64(s.hasher.Stats().Waiting) }),
		givingWay: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "xcloak_rejections_giving_way", Help: "Rejected sign-ins waiting, before their answer, for the password checks in flight."},
			func() float64 { return float64(s.hasher.Stats().GivingWay) }),
		hashesGiving: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "xcloak_hashes_giving_way", Help: "Password hashes waiting, before they take a slot, for returning browsers' sign-ins in flight."},
			func() float64 { return float64(s.hasher.Stats().HashesGivingWay) }),
		degraded: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "xcloak_redis_degraded", Help: "1 while Redis is unreachable and limits follow the failure policy.",
			ConstLabels: prometheus.Labels{"policy": string(s.limits.Policy())}},
			func() float64 {
				if s.limits.Degraded() {
					return 1
				}
				return 0
			}),
		eventDropped: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "xcloak_security_events_dropped_total", Help: "Security events dropped because the queue or a store's backlog was full, because Postgres refused their row, or left unwritten at shutdown."},
			func() float64 { return float64(s.events.Dropped()) }),
		mailDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xcloak_reset_mails_dropped_total", Help: "Link mails and notices that were not sent, by reason: queue_full, domain_limit, account_limit, send_failed, unavailable."},
			[]string{"reason"}),
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xcloak_signin_held_total", Help: "Sign-ins with the right password held for new-device verification (a link was mailed)."}),
	}
	for _, c := range []prometheus.Collector{m.attempts, m.successes, m.failures, m.rejected, m.lockouts, m.resets,
		m.decision, m.redisErrors, m.dbErrors, m.hashRunning, m.hashWaiting, m.givingWay, m.hashesGiving, m.degraded, m.eventDropped, m.mailDropped, m.held} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe counts an event.
func (m *metrics) observe(e Event) {
	switch e.Kind {
	case EventLoginSucceeded:
		m.attempts.Inc()
		m.successes.Inc()
	case EventLoginFailed:
		m.attempts.Inc()
		m.failures.Inc()
	case EventLoginInvalid, EventLoginUnavailable:
		m.attempts.Inc()
	case EventLoginRejected:
		m.attempts.Inc()
		m.rejectedFor(e.Rule).Inc()
	case EventResetRejected, EventVerificationRejected:
		m.rejectedFor(e.Rule).Inc()
	case EventVerificationRequired:
		m.attempts.Inc()
		m.held.Inc()
	case EventLockout:
		m.lockouts.Inc()
	case EventResetRequested:
		m.resets.Inc()
	case EventResetMailDropped:
		m.mailDropped.WithLabelValues(e.Detail["reason"]).Inc()
	}
}

// rejectedFor returns the counter of the rejections of rule.
func (m *metrics) rejectedFor(rule string) prometheus.Counter {
	if c, ok := m.rejectedBy.Load(rule); ok {
		return c.(prometheus.Counter)
	}
	c := m.rejected.WithLabelValues(rule)
	m.rejectedBy.Store(rule, c)
	return c
}

func (m *metrics) observeDecision(d time.Duration) { m.decision.Observe(d.Seconds()) }
