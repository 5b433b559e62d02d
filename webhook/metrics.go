package webhook

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Sender's Prometheus metrics.
type metrics struct {
	deliveries     *prometheus.CounterVec
	dropped        *prometheus.CounterVec
	attemptSeconds prometheus.Histogram
	queued         prometheus.Gauge
}

// newMetrics registers the metrics on reg (nil: none).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xcloak_webhook_deliveries_total",
			Help: "Webhook deliveries finished, by result: succeeded (a 2xx) or failed (refused with another status, or attempts run out).",
		}, []string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xcloak_webhook_dropped_total",
			Help: "Webhook deliveries dropped unsent, by reason: queue_full or shutdown.",
		}, []string{"reason"}),
		attemptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "xcloak_webhook_attempt_seconds",
			Help:    "Time of one attempt to deliver a webhook, until the answer or the error.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xcloak_webhook_queued",
			Help: "Webhook deliveries waiting in the queues, all URLs together.",
		}),
	}
	for _, r := range []string{"succeeded", "failed"} {
		m.deliveries.WithLabelValues(r)
	}
	for _, r := range []string{DropQueueFull, DropShutdown} {
		m.dropped.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.dropped, m.attemptSeconds, m.queued} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// RegisterMetrics registers the metrics of a Sender on reg without one:
// serve exports them, at zero, when no URL is set, so that a board or an
// alert reads the same series either way.
func RegisterMetrics(reg prometheus.Registerer) error {
	_, err := newMetrics(reg)
	return err
}
