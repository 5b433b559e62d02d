package app

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// takeBackWarnEvery bounds the warnings about failed take-backs: a loaded
// cluster may fail many at once, and one line says as much as a thousand.
const takeBackWarnEvery = time.Minute

// takeBackReport returns what the limiter calls for each admission it
// could not take back (ratelimit.Limiter.OnTakeBackFailure): it counts it
// in xcloak_limiter_take_backs_failed_total{rule}, registered in reg, and
// warns in log at most once every takeBackWarnEvery, with how many failed
// since the last warning. Such an admission makes its rule stricter than
// it is, never looser, until it leaves the window.
func takeBackReport(log *slog.Logger, reg prometheus.Registerer) (func(rule string, err error), error) {
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xcloak_limiter_take_backs_failed_total",
		Help: "Admissions a decision split over Redis Cluster slots could not take back after another rule rejected it, by rule; each counts against its rule until it leaves the window.",
	}, []string{"rule"})
	if err := reg.Register(failed); err != nil {
		return nil, err
	}
	var (
		mu     sync.Mutex
		warned time.Time
		since  int
	)
	return func(rule string, err error) {
		failed.WithLabelValues(rule).Inc()
		mu.Lock()
		since++
		now := time.Now()
		if now.Sub(warned) < takeBackWarnEvery {
			mu.Unlock()
			return
		}
		n := since
		warned, since = now, 0
		mu.Unlock()
		log.Warn("limits: admissions not taken back count against their rule until they leave the window",
			"failed", n, "rule", rule, "err", err)
	}, nil
}
