package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/urlport"
)

// Config is how a Sender delivers; DefaultConfig gives the documented
// values, URLs and Secret must still be set.
type Config struct {
	// URLs are the receivers; each gets every event.
	URLs []*url.URL
	// Secret keys the signatures, unless Secrets is set.
	Secret []byte
	// Secrets, if set, are one secret per URL, in the order of URLs: a
	// receiver that holds only its own cannot sign an event another
	// receiver would take.
	Secrets [][]byte
	// Queue bounds the deliveries waiting per URL in each of its two
	// queues, the lockouts' and held sign-ins' and the rest's (see
	// target); past it they are dropped.
	Queue int
	// Workers is how many deliveries to one URL are under way at once,
	// but for the one the urgent queue's own worker sends (see target).
	Workers int
	// Attempts bounds the tries of one delivery.
	Attempts int
	// Timeout bounds one attempt, from connecting to the end of the answer.
	Timeout time.Duration
	// MinBackoff is the wait before the first retry; each retry doubles
	// it, up to MaxBackoff, and a full jitter draws the wait from zero to
	// that. A Retry-After is honoured up to MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Flush bounds the time given at shutdown to the deliveries still
	// queued or under way; the rest are dropped.
	Flush time.Duration
}

// DefaultConfig returns the defaults: 1000 deliveries queued and 2
// workers per URL, 6 attempts of at most 5 seconds each, waits from 1
// second doubling up to 1 minute, and 10 seconds to flush at shutdown.
func DefaultConfig() Config {
	return Config{Queue: 1000, Workers: 2, Attempts: 6, Timeout: 5 * time.Second,
		MinBackoff: time.Second, MaxBackoff: time.Minute, Flush: 10 * time.Second}
}

// Deps are a Sender's collaborators; every one may be nil.
type Deps struct {
	// Client makes the requests; nil: a client of its own. Its redirects
	// are never followed, whatever its CheckRedirect.
	Client *http.Client
	Logger *slog.Logger
	// Metrics is where the Sender registers its metrics; nil: nowhere.
	Metrics prometheus.Registerer
	// Now is the clock of the signatures; nil: time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx is done, before a retry; nil: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Dropped counts the deliveries not sent, dropped or given up, where
	// every replica's dashboard reads them (package counters); nil: only
	// in the metrics.
	Dropped DropCounter
}

// DropCounter counts the deliveries not sent (dropped, or given up after
// their attempts or a refusal) in a store the dashboards of every replica
// read.
type DropCounter interface {
	// CountWebhooksDropped counts n drops at at. When it fails, they may
	// have been counted (only the answer lost): given again, with the
	// drops since added, they are counted once.
	CountWebhooksDropped(ctx context.Context, at time.Time, n int64) error
}

// Drop reasons, the values of xcloak_webhook_dropped_total's reason.
const (
	DropQueueFull = "queue_full" // the URL's queue was full
	DropShutdown  = "shutdown"   // still queued or under way when the flush at shutdown ran out
)

// Sender delivers the events of interest to every URL. Build it with New,
// hand it to auth.Deps.Hook (the service runs it), or call Run yourself.
type Sender struct {
	cfg     Config
	client  *http.Client
	log     *slog.Logger
	now     func() time.Time
	sleep   func(context.Context, time.Duration) error
	dropped DropCounter
	metrics *metrics
	targets []*target

	// pendingDrops are drops and deliveries given up not yet added to
	// Dropped; droppedTotal every drop, for the log; shutdownDrops those
	// of the flush at shutdown, logged once when it ends.
	pendingDrops, droppedTotal, shutdownDrops atomic.Int64
}

// target is one receiver: its own queues and workers, so that a dead one
// never holds up the others. Its events are queued in two: the lockouts
// and held sign-ins (floods), which anyone can cause in numbers, an
// application's key for any account name it likes; and the rest, which
// only administrators, the commands and the detector make (accounts and
// keys made or removed, attack mode), so that a flood of the first
// neither drops nor delays them. Workers take from urgent first, and one
// more worker takes from urgent alone: were every other held by a flood's
// deliveries (a slow receiver, their retries' waits), it is free.
type target struct {
	url    string
	label  string // the URL without its path and query, for logs
	secret []byte // signs what it is sent
	queue  chan delivery
	urgent chan delivery
}

// floods reports whether ev is of the events anyone can cause in numbers
// (see target). A lock or an unlock that an administrator, the command
// line or development mode made (data "by") is not: it is theirs, as an
// account disabled is, and a flood of lockouts, or of the unlocks that
// resets make, must not drop it.
func floods(ev Event) bool {
	switch ev.Type {
	case TypeLockoutStarted, TypeAccountUnlocked:
		return !administrators(ev.Data["by"])
	case TypeLockoutEnded, TypeSignInHeld:
		return true
	}
	return false
}

// administrators reports whether by, an event's data "by", names an
// administrator ("admin:<email>"), the command line or development mode.
func administrators(by string) bool {
	return strings.HasPrefix(by, "admin:") || by == "cli" || by == "dev"
}

// takeUrgent is take for the urgent queue alone.
func (t *target) takeUrgent(done <-chan struct{}) (delivery, bool) {
	select {
	case d := <-t.urgent:
		return d, true
	case <-done:
	}
	return queued(t.urgent)
}

// take returns the next delivery of t, an urgent one first, waiting
// until one comes or done is closed; then it returns what is still
// queued, urgent first, and false once nothing is.
func (t *target) take(done <-chan struct{}) (delivery, bool) {
	if d, ok := queued(t.urgent); ok {
		return d, true
	}
	select {
	case d := <-t.urgent:
		return d, true
	case d := <-t.queue:
		return d, true
	case <-done:
	}
	return queued(t.urgent, t.queue)
}

// queued returns a delivery waiting in the first of queues that has one,
// without waiting; false if none has.
func queued(queues ...chan delivery) (delivery, bool) {
	for _, q := range queues {
		select {
		case d := <-q:
			return d, true
		default:
		}
	}
	return delivery{}, false
}

// delivery is one event on its way to one URL.
type delivery struct {
	id   string
	typ  string
	body []byte
}

// New checks cfg and returns a Sender. Zero fields of cfg take their
// defaults.
func New(cfg Config, d Deps) (*Sender, error) {
	def := DefaultConfig()
	if cfg.Queue <= 0 {
		cfg.Queue = def.Queue
	}
	if cfg.Workers <= 0 {
		cfg.Workers = def.Workers
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = def.Attempts
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = def.Timeout
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = def.MinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(def.MaxBackoff, cfg.MinBackoff)
	}
	if cfg.Flush <= 0 {
		cfg.Flush = def.Flush
	}
	if len(cfg.URLs) == 0 {
		return nil, errors.New("webhook: no URL")
	}
	secrets := cfg.Secrets
	switch {
	case secrets == nil:
		if err := CheckSecret(cfg.Secret); err != nil {
			return nil, err
		}
	case len(secrets) != len(cfg.URLs):
		return nil, fmt.Errorf("webhook: %d secrets for %d URLs: give one secret for all, or one per URL", len(secrets), len(cfg.URLs))
	}
	s := &Sender{cfg: cfg, log: d.Logger, now: d.Now, sleep: d.Sleep, dropped: d.Dropped}
	for i, u := range cfg.URLs {
		if err := CheckURL(u); err != nil {
			return nil, err
		}
		secret := cfg.Secret
		if secrets != nil {
			secret = secrets[i]
			if err := CheckSecret(secret); err != nil {
				return nil, fmt.Errorf("URL %d: %w", i+1, err)
			}
		}
		s.targets = append(s.targets, &target{url: u.String(), label: u.Scheme + "://" + u.Host, secret: secret,
			queue: make(chan delivery, cfg.Queue), urgent: make(chan delivery, cfg.Queue)})
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.sleep == nil {
		s.sleep = sleep
	}
	client := &http.Client{Transport: boundedTransport()}
	if d.Client != nil {
		client = d.Client
	}
	// A copy, so that the caller's client keeps its own redirect policy:
	// a receiver that redirects answers the delivery, which is then not
	// taken (a 3xx), rather than sending it, signed, somewhere else.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.Transport = noLocation{c.Transport}
	s.client = &c
	var err error
	if s.metrics, err = newMetrics(d.Metrics); err != nil {
		return nil, err
	}
	return s, nil
}

// noLocation is a transport that drops the Location of a redirect: the
// client parses it before CheckRedirect is asked, and one it cannot parse
// fails the attempt as a network error, retried, where the redirect is
// refused (see deliver). No redirect is followed, so none is read.
type noLocation struct{ rt http.RoundTripper }

func (t noLocation) RoundTrip(req *http.Request) (*http.Response, error) {
	rt := t.rt
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	if err == nil && resp.StatusCode/100 == 3 {
		resp.Header.Del("Location")
	}
	return resp, err
}

// maxAnswerHeaderBytes bounds the headers of a receiver's answer, as
// deliver bounds its body: a receiver says what it took by its status.
const maxAnswerHeaderBytes = 64 << 10

// boundedTransport is net/http's default transport, but reading no more
// than maxAnswerHeaderBytes of an answer's headers, where the default
// reads up to 10 MB on every attempt of every worker.
func boundedTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxResponseHeaderBytes = maxAnswerHeaderBytes
	return t
}

// MinSecretBytes is the shortest secret accepted: as many as the HMAC's
// output, so that the key is not the weak part.
const MinSecretBytes = 32

// CheckSecret refuses a secret shorter than MinSecretBytes.
func CheckSecret(secret []byte) error {
	if len(secret) < MinSecretBytes {
		return errors.New("webhook: the secret must be at least 32 bytes (make one with openssl rand -hex 32)")
	}
	return nil
}

// CheckURL refuses a URL that is not absolute http(s) with a host, or that
// carries a user name or password (credentials belong in no URL that is
// logged and shown; the signature authenticates the sender).
func CheckURL(u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("webhook: a URL must start with https:// or http://")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("webhook: a URL must name a host")
	case u.User != nil:
		return errors.New("webhook: a URL must not carry a user name or password")
	case u.Fragment != "":
		return errors.New("webhook: a URL must not have a #fragment")
	case !urlport.Valid(u.Port()):
		// net/url takes any digits: such a receiver fails every attempt.
		return errors.New("webhook: a URL's port must be a number from 1 to 65535")
	}
	return nil
}

// EventsWritten queues, for every URL, each row of rows that is an event
// of interest (auth.EventHook). It never blocks.
func (s *Sender) EventsWritten(rows []auth.Event) {
	for _, e := range rows {
		if ev, ok := FromAuth(e); ok {
			s.Send(ev)
		}
	}
}

// Send queues ev for every URL, dropping and counting it for a URL whose
// queue is full. It never blocks.
func (s *Sender) Send(ev Event) {
	body, err := json.Marshal(ev)
	if err != nil { // a map of strings always marshals
		s.log.Error("webhook: encoding event", "err", err)
		return
	}
	d := delivery{id: ev.ID, typ: ev.Type, body: body}
	flood := floods(ev)
	for _, t := range s.targets {
		queue := t.urgent
		if flood {
			queue = t.queue
		}
		select {
		case queue <- d:
			s.metrics.queued.Inc()
		default:
			s.drop(t, d, DropQueueFull)
		}
	}
}

// drop counts a delivery dropped.
func (s *Sender) drop(t *target, d delivery, reason string) {
	s.metrics.dropped.WithLabelValues(reason).Inc()
	s.pendingDrops.Add(1)
	if reason == DropShutdown {
		s.shutdownDrops.Add(1) // Run logs them once
		return
	}
	// One line in a thousand under a flood of drops.
	if n := s.droppedTotal.Add(1); n%1000 == 1 {
		s.log.Warn("webhook delivery dropped", "url", t.label, "type", d.typ, "id", d.id, "reason", reason, "dropped_total", n)
	}
}

// dropCountInterval is how often drops are added to the shared counter:
// a flood of drops is a few writes, not one each.
const dropCountInterval = 5 * time.Second

// Run delivers until ctx is done; then it gives the deliveries still
// queued or under way cfg.Flush to finish, drops the rest and returns.
func (s *Sender) Run(ctx context.Context) {
	// The deliveries' own context outlives ctx by the flush.
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var wg sync.WaitGroup
	for _, t := range s.targets {
		for range s.cfg.Workers {
			wg.Go(func() { s.work(ctx, work, t, t.take) })
		}
		wg.Go(func() { s.work(ctx, work, t, t.takeUrgent) })
	}
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		tick := time.NewTicker(dropCountInterval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				s.countDrops(work)
			case <-work.Done():
				return
			}
		}
	}()
	<-ctx.Done()
	flushed := make(chan struct{})
	go func() { wg.Wait(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(s.cfg.Flush):
		cancel()
		<-flushed
	}
	cancel()
	<-counted
	if n := s.shutdownDrops.Load(); n > 0 {
		s.log.Warn("webhook deliveries dropped at shutdown", "dropped", n, "flush_seconds", s.cfg.Flush.Seconds())
	}
	final, done := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer done()
	s.countDrops(final)
}

// work delivers what take gives of t's queues until ctx is done, then
// what is still queued until work is done; a delivery cut short by work
// counts as dropped.
func (s *Sender) work(ctx, work context.Context, t *target, take func(done <-chan struct{}) (delivery, bool)) {
	for {
		d, ok := take(ctx.Done())
		if !ok {
			return
		}
		s.metrics.queued.Dec()
		s.deliver(work, t, d)
	}
}

// countDrops adds the drops counted since the last call to the shared
// counter; on failure they wait for the next.
func (s *Sender) countDrops(ctx context.Context) {
	n := s.pendingDrops.Swap(0)
	if n == 0 || s.dropped == nil {
		return
	}
	if err := s.dropped.CountWebhooksDropped(ctx, s.now(), n); err != nil {
		s.pendingDrops.Add(n)
		s.log.Warn("webhook: counting dropped deliveries", "err", err)
	}
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is the wait before retry n (1 for the first): a full jitter over
// MinBackoff doubled n-1 times, at most MaxBackoff.
func (s *Sender) backoff(n int) time.Duration {
	// Doubled step by step, not shifted: a large MinBackoff shifted by
	// the retries' count could wrap around to a short wait.
	ceil := s.cfg.MinBackoff
	for i := 1; i < n && ceil < s.cfg.MaxBackoff; i++ {
		ceil = min(ceil, s.cfg.MaxBackoff/2) * 2
	}
	ceil = min(ceil, s.cfg.MaxBackoff)
	return time.Duration(rand.Int64N(int64(ceil)) + 1)
}
