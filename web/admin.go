package web

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/templates"
)

// Errors of the administrators' pages.
var (
	errSignedOut = errors.New("web: sign-in required")
	errNotAdmin  = errors.New("web: administrators only")
	errBadCursor = errors.New("web: malformed events cursor")
	// errTooManyStreams: the session holds maxStreamsPerSession streams.
	errTooManyStreams = errors.New("web: too many dashboard streams for one session")
)

// adminFail answers an administrators' request that failed: JSON for the
// API, an error page otherwise.
func (s *Server) adminFail(w http.ResponseWriter, r *http.Request, nav templates.Nav, err error) {
	p := problemFor(err)
	s.logProblem(r, p, err)
	setRetryAfter(w, p)
	if isAPI(r) {
		writeJSON(w, p.status, map[string]string{"error": p.code})
		return
	}
	s.render(w, r, p.status, templates.ErrorPage(templates.ErrorProps{Nav: nav, Status: p.status, Message: p.message}))
}

func navFor(sess auth.Session) templates.Nav {
	return templates.Nav{SignedIn: true, Email: sess.Email, IsAdmin: sess.IsAdmin}
}

// adminHandler serves a signed-in administrator.
type adminHandler func(w http.ResponseWriter, r *http.Request, sess auth.Session)

// requireAdmin lets administrators through to h. A visitor without a
// session is sent to /login (the API answers 401); a signed-in user who is
// not an administrator gets 403.
func (s *Server) requireAdmin(h adminHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.auth.Session(r.Context(), s.readCookie(r, sessionCookie))
		switch {
		case errors.Is(err, auth.ErrNoSession) && !isAPI(r):
			http.Redirect(w, r, "/login", http.StatusSeeOther)
		case errors.Is(err, auth.ErrNoSession):
			s.adminFail(w, r, templates.Nav{}, errSignedOut)
		case err != nil:
			s.adminFail(w, r, templates.Nav{}, err)
		case !sess.IsAdmin:
			s.adminFail(w, r, navFor(sess), errNotAdmin)
		default:
			h(w, r, sess)
		}
	})
}

// eventsPerPage is the length of a page of security events.
const eventsPerPage = 20

// dashboardQuery is what a dashboard URL asks for.
type dashboardQuery struct {
	period auth.Period
	before int64 // 0: the newest events
}

// parseDashboardQuery reads ?period=5m|1h|24h (default 5m) and, for the
// events, ?before=<id>. A parameter given twice is refused, not guessed at.
func parseDashboardQuery(q url.Values) (dashboardQuery, error) {
	out := dashboardQuery{period: auth.Period5m}
	if v, ok := q["period"]; ok {
		if len(v) != 1 {
			return out, auth.ErrInvalidPeriod
		}
		p, err := auth.ParsePeriod(v[0])
		if err != nil {
			return out, err
		}
		out.period = p
	}
	if v, ok := q["before"]; ok {
		if len(v) != 1 {
			return out, errBadCursor
		}
		id, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || id < 1 {
			return out, errBadCursor
		}
		out.before = id
	}
	return out, nil
}

func dashboardURL(p auth.Period, extra ...string) string {
	v := url.Values{"period": {p.String()}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return "/admin?" + v.Encode()
}

// Words for the period switcher and headings.
var periodWords = map[auth.Period]struct{ link, text string }{
	auth.Period5m:  {"5 minutes", "the last 5 minutes"},
	auth.Period1h:  {"1 hour", "the last hour"},
	auth.Period24h: {"24 hours", "the last 24 hours"},
}

// dashboardView is the dashboard's data as the templates take it.
type dashboardView struct {
	asOf     time.Time
	live     templates.LiveProps
	lockouts templates.LockoutsProps
	events   templates.EventsProps
}

// loadDashboard reads what the dashboard shows for q. The page and the
// stream both use it, so they cannot disagree.
func (s *Server) loadDashboard(ctx context.Context, q dashboardQuery) (dashboardView, error) {
	d, err := s.auth.Dashboard(ctx, q.period)
	if err != nil {
		return dashboardView{}, err
	}
	events, err := s.auth.Events(ctx, auth.EventFilter{BeforeID: q.before, Limit: eventsPerPage + 1})
	if err != nil {
		return dashboardView{}, err
	}
	v := dashboardView{asOf: d.AsOf}
	sum := d.Summary
	v.live = templates.LiveProps{
		PeriodText:          periodWords[q.period].text,
		Attempts:            sum.Attempts,
		Successes:           sum.Successes,
		Failures:            sum.Failures,
		Rejected:            sum.Rejected,
		Invalid:             sum.Invalid,
		Unavailable:         sum.Unavailable,
		Degraded:            d.Degraded,
		FailurePolicy:       d.FailurePolicy,
		CountersUnavailable: d.CountersUnavailable,
		ActiveLockouts:      sum.ActiveLockouts,
		Lockouts:            sum.Lockouts,
		ResetRequests:       sum.ResetRequests,
		MailsDropped:        sum.MailsDropped,
		TopSources:          ranked(d.TopSources),
		TopAccounts:         ranked(d.TopAccounts),
	}
	for _, rule := range rulesOf(sum) {
		label := auth.RuleLabel(rule)
		if label == "" {
			label = rule
		}
		v.live.Rules = append(v.live.Rules, templates.RuleCount{Rule: rule, Label: label, Count: sum.RejectedByRule[rule]})
	}
	for _, m := range d.Series {
		v.live.Chart = append(v.live.Chart, templates.ChartMinute{Start: m.Start, Attempts: m.Attempts, Rejected: m.Rejected})
	}
	v.lockouts = templates.LockoutsProps{Now: d.AsOf, Total: sum.ActiveLockouts, Period: q.period.String()}
	for _, l := range d.Lockouts {
		v.lockouts.Rows = append(v.lockouts.Rows, templates.LockoutRow{
			Account: l.Account, Since: l.LockedAt, Until: l.LockedUntil, Failures: l.Failures, Level: l.Level,
		})
	}
	v.events = templates.EventsProps{Now: d.AsOf}
	if len(events) > eventsPerPage {
		events = events[:eventsPerPage]
		v.events.OlderHref = dashboardURL(q.period, "before", strconv.FormatInt(events[len(events)-1].ID, 10))
	}
	if q.before != 0 {
		v.events.NewestHref = dashboardURL(q.period)
	}
	for _, e := range events {
		v.events.Rows = append(v.events.Rows, eventRow(e))
	}
	return v, nil
}

// rulesOf lists the rules of a summary: the known ones in their order,
// then any other, by name.
func rulesOf(sum auth.Summary) []string {
	rules := auth.RejectionRules()
	var extra []string
	for r := range sum.RejectedByRule {
		if !slices.Contains(rules, r) {
			extra = append(extra, r)
		}
	}
	slices.Sort(extra)
	return append(rules, extra...)
}

func ranked(in []auth.Ranked) []templates.Ranked {
	out := make([]templates.Ranked, len(in))
	for i, r := range in {
		out[i] = templates.Ranked{Name: r.Name, Count: r.Count}
	}
	return out
}

// eventRow puts a stored event into words.
func eventRow(e auth.StoredEvent) templates.EventRow {
	row := templates.EventRow{At: e.At, Account: e.Account, Source: e.Source, What: e.Kind}
	switch e.Kind {
	case auth.EventLockout:
		row.What = "Account locked"
		if e.Detail["device"] != "" {
			row.What = "Known device locked"
		}
		var parts []string
		if l := e.Detail["level"]; l != "" {
			parts = append(parts, "Level "+l)
		}
		if until, err := time.Parse(time.RFC3339, e.Detail["until"]); err == nil {
			parts = append(parts, "until "+until.UTC().Format("2 Jan 15:04 UTC"))
		}
		row.Detail = strings.Join(parts, ", ")
	case auth.EventUnlock:
		row.What = "Lockout lifted"
		by := e.Detail["by"]
		switch {
		case strings.HasPrefix(by, "admin:"):
			row.Detail = "By administrator " + strings.TrimPrefix(by, "admin:")
		case by == "success":
			row.Detail = "By a successful sign-in after it ended"
		case by == "reset":
			row.Detail = "By a password reset"
		case by == "cli":
			row.Detail = "From the command line"
		case by != "":
			row.Detail = "By " + by
		}
	case auth.EventResetRequested:
		row.What = "Password reset requested"
	case auth.EventResetCompleted:
		row.What = "Password changed by reset"
	case auth.EventNewDevice:
		row.What = "Sign-in from a new device"
	case auth.EventUnlockConfirmed:
		row.What = "Unlock link used"
		row.Detail = "The browser became a known device"
	case auth.EventSignedOutEverywhere:
		row.What = "Signed out everywhere"
		if by := e.Detail["by"]; strings.HasPrefix(by, "admin:") {
			row.Detail = "By administrator " + strings.TrimPrefix(by, "admin:")
		} else if by == "cli" {
			row.Detail = "From the command line"
		}
	}
	return row
}

// handleDashboard serves GET /admin: the whole page, complete without
// scripts.
func (s *Server) handleDashboard() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) {
		nav := navFor(sess)
		q, err := parseDashboardQuery(r.URL.Query())
		if err != nil {
			s.adminFail(w, r, nav, err)
			return
		}
		v, err := s.loadDashboard(r.Context(), q)
		if err != nil {
			s.adminFail(w, r, nav, err)
			return
		}
		props := templates.DashboardProps{
			Nav:       nav,
			StreamURL: "/admin/stream?" + url.Values{"period": {q.period.String()}}.Encode(),
			AsOf:      v.asOf,
			Live:      v.live,
			Lockouts:  v.lockouts,
			Events:    v.events,
		}
		for _, p := range auth.Periods() {
			props.Periods = append(props.Periods, templates.PeriodLink{Label: periodWords[p].link, Href: dashboardURL(p), Current: p == q.period})
		}
		switch r.URL.Query().Get("notice") {
		case "unlocked":
			props.Notice = "The lockout was lifted."
		case "not-locked":
			props.Notice = "That account was not locked out; its lockout may have ended already."
		case "signed-out":
			props.Notice = "The account was signed out everywhere; its known devices are forgotten."
		case "no-account":
			props.Notice = "No account has that address."
		}
		s.render(w, r, http.StatusOK, templates.DashboardPage(props))
	})
}

// accountForm reads the form of an administrator's action on one account:
// its email and the dashboard period to return to.
func accountForm(r *http.Request) (email string, period auth.Period, err error) {
	form, err := decodeForm(r, templates.FieldEmail, templates.FieldPeriod)
	if err != nil {
		return "", 0, err
	}
	period = auth.Period5m
	if v := form[templates.FieldPeriod]; v != "" {
		if period, err = auth.ParsePeriod(v); err != nil {
			return "", 0, err
		}
	}
	return form[templates.FieldEmail], period, nil
}

// handleUnlock serves POST /admin/lockouts/unlock: it lifts an account's
// lockout in the administrator's name and returns to the dashboard. The
// cross-origin check every POST passes keeps other sites from sending it.
func (s *Server) handleUnlock() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) {
		email, period, err := accountForm(r)
		if err != nil {
			s.adminFail(w, r, navFor(sess), err)
			return
		}
		wasLocked, err := s.auth.Unlock(r.Context(), email, "admin:"+sess.Email)
		if err != nil {
			s.adminFail(w, r, navFor(sess), err)
			return
		}
		notice := "unlocked"
		if !wasLocked {
			notice = "not-locked"
		}
		http.Redirect(w, r, dashboardURL(period, "notice", notice), http.StatusSeeOther)
	})
}

// handleSignOutEverywhere serves POST /admin/users/sign-out: it ends every
// session of an account and forgets its known devices, in the
// administrator's name, and returns to the dashboard.
func (s *Server) handleSignOutEverywhere() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) {
		email, period, err := accountForm(r)
		if err != nil {
			s.adminFail(w, r, navFor(sess), err)
			return
		}
		notice := "signed-out"
		switch err := s.auth.SignOutEverywhere(r.Context(), email, "admin:"+sess.Email); {
		case errors.Is(err, auth.ErrNoUser), errors.Is(err, auth.ErrInvalidEmail):
			notice = "no-account"
		case err != nil:
			s.adminFail(w, r, navFor(sess), err)
			return
		}
		http.Redirect(w, r, dashboardURL(period, "notice", notice), http.StatusSeeOther)
	})
}

// statsJSON is GET /api/v1/admin/stats: the dashboard's figures for
// scripts and monitoring.
type statsJSON struct {
	Period      auth.Period `json:"period"`
	From        time.Time   `json:"from"`
	To          time.Time   `json:"to"`
	Attempts    int64       `json:"attempts"`
	Successes   int64       `json:"successes"`
	Failures    int64       `json:"failures"`
	Invalid     int64       `json:"invalid"`
	Unavailable int64       `json:"unavailable"`
	// Degraded: Redis is unreachable and limits follow FailurePolicy.
	Degraded            bool             `json:"degraded"`
	FailurePolicy       string           `json:"failure_policy"`
	CountersUnavailable bool             `json:"counters_unavailable"`
	Rejected            int64            `json:"rejected"`
	RejectedByRule      map[string]int64 `json:"rejected_by_rule"`
	Lockouts            int64            `json:"lockouts"`
	ActiveLockouts      int              `json:"active_lockouts"`
	ResetRequests       int64            `json:"reset_requests"`
	// ResetMailsDropped counts reset mails of accepted requests that were
	// not sent (queue full, domain over its limit, mail server failed).
	ResetMailsDropped int64         `json:"reset_mails_dropped"`
	TopSources        []sourceJSON  `json:"top_sources"`
	TopAccounts       []accountJSON `json:"top_accounts"`
	PerMinute         []minuteJSON  `json:"per_minute"`
}

type sourceJSON struct {
	Source   string `json:"source"`
	Rejected int64  `json:"rejected"`
}

type accountJSON struct {
	Account          string `json:"account"`
	FailedOrRejected int64  `json:"failed_or_rejected"`
}

type minuteJSON struct {
	Start    time.Time `json:"start"`
	Attempts int64     `json:"attempts"`
	Rejected int64     `json:"rejected"`
}

func (s *Server) handleAdminStats() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) {
		q, err := parseDashboardQuery(r.URL.Query())
		if err != nil {
			s.adminFail(w, r, templates.Nav{}, err)
			return
		}
		d, err := s.auth.Dashboard(r.Context(), q.period)
		if err != nil {
			s.adminFail(w, r, templates.Nav{}, err)
			return
		}
		sum := d.Summary
		out := statsJSON{
			Period: sum.Period, From: sum.From, To: sum.To,
			Attempts: sum.Attempts, Successes: sum.Successes, Failures: sum.Failures, Invalid: sum.Invalid,
			Unavailable: sum.Unavailable, Degraded: d.Degraded, FailurePolicy: d.FailurePolicy, CountersUnavailable: d.CountersUnavailable,
			Rejected: sum.Rejected, RejectedByRule: sum.RejectedByRule,
			Lockouts: sum.Lockouts, ActiveLockouts: sum.ActiveLockouts, ResetRequests: sum.ResetRequests,
			ResetMailsDropped: sum.MailsDropped,
			TopSources:        make([]sourceJSON, 0, len(d.TopSources)),
			TopAccounts:       make([]accountJSON, 0, len(d.TopAccounts)),
			PerMinute:         make([]minuteJSON, 0, len(d.Series)),
		}
		for _, t := range d.TopSources {
			out.TopSources = append(out.TopSources, sourceJSON{t.Name, t.Count})
		}
		for _, t := range d.TopAccounts {
			out.TopAccounts = append(out.TopAccounts, accountJSON{t.Name, t.Count})
		}
		for _, m := range d.Series {
			out.PerMinute = append(out.PerMinute, minuteJSON{m.Start, m.Attempts, m.Rejected})
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// Live updates.
const (
	// liveInterval is how often a watched period's figures are re-read.
	// Events reach the stores within the Recorder's flush interval, so the
	// page shows new traffic within about a second and a half.
	liveInterval = time.Second
	// streamPing keeps idle proxies from closing a quiet stream.
	streamPing = 15 * time.Second
	// streamRecheck is how often a stream checks that its session still
	// belongs to an administrator.
	streamRecheck = 30 * time.Second
	// streamLifetime ends every stream after a while; the browser
	// reconnects at once, which spreads streams over replicas again after
	// a deploy.
	streamLifetime = 10 * time.Minute
	// streamWriteTimeout drops a client that stops reading.
	streamWriteTimeout = 10 * time.Second
	// streamRetry is the reconnection delay the browser is told to use.
	streamRetry = 2 * time.Second
	// maxStreamsPerSession bounds the streams one session holds open at
	// once on a replica: a few tabs are normal, and a stolen or scripted
	// admin session cannot pin an unbounded number of connections and
	// goroutines.
	maxStreamsPerSession = 4
)

// handleDashboardStream serves GET /admin/stream: Server-Sent Events that
// carry the dashboard's live regions as HTML ("live", "lockouts",
// "events"), each sent at once and then whenever it changes, and a
// "status" event when the stores stop or start answering.
//
// All streams of a period share one reader (liveHub), so a room of open
// dashboards costs the stores no more than one.
func (s *Server) handleDashboardStream() http.Handler {
	hub := newLiveHub(s.renderLive, liveInterval, s.log)
	shutdowns := &shutdownWatch{done: map[*http.Server]chan struct{}{}}
	open := &streamCounts{n: map[string]int{}}
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) {
		q, err := parseDashboardQuery(r.URL.Query())
		if err != nil {
			s.adminFail(w, r, navFor(sess), err)
			return
		}
		token := s.readCookie(r, sessionCookie)
		if !open.acquire(token) {
			s.adminFail(w, r, navFor(sess), errTooManyStreams)
			return
		}
		defer open.release(token)
		q.before = 0
		rc := http.NewResponseController(w)
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)

		var buf bytes.Buffer
		send := func() bool {
			// The server's WriteTimeout is for ordinary requests; a stream
			// gets a deadline per write instead.
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			_, err := w.Write(buf.Bytes())
			buf.Reset()
			return err == nil && rc.Flush() == nil
		}
		buf.WriteString("retry: " + strconv.FormatInt(streamRetry.Milliseconds(), 10) + "\n\n")
		if !send() {
			return
		}
		sub := hub.subscribe(q.period)
		defer hub.unsubscribe(sub)
		ping := time.NewTicker(streamPing)
		defer ping.Stop()
		recheck := time.NewTicker(streamRecheck)
		defer recheck.Stop()
		end := time.NewTimer(streamLifetime)
		defer end.Stop()
		shuttingDown := shutdowns.of(r)

		var sent liveFrame
		for {
			select {
			case <-r.Context().Done():
				return
			case <-shuttingDown:
				return
			case <-end.C:
				return
			case <-recheck.C:
				if again, err := s.auth.Session(r.Context(), token); err != nil || !again.IsAdmin {
					return
				}
			case <-ping.C:
				buf.WriteString(": ping\n\n")
				if !send() {
					return
				}
			case <-sub.ready:
				f := hub.latest(sub)
				if f.failed != sent.failed || sent.live == "" {
					status := "ok"
					if f.failed {
						status = "unavailable"
					}
					writeEvent(&buf, "status", status)
				}
				for _, part := range []struct{ name, now, before string }{
					{"live", f.live, sent.live},
					{"lockouts", f.lockouts, sent.lockouts},
					{"events", f.events, sent.events},
				} {
					if part.now != part.before && part.now != "" {
						writeEvent(&buf, part.name, part.now)
					}
				}
				sent = f
				if buf.Len() > 0 && !send() {
					return
				}
			}
		}
	})
}

// streamCounts counts the open streams of each session, by its token.
type streamCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes a place for a stream of the session, or reports false
// when it holds maxStreamsPerSession already.
func (c *streamCounts) acquire(token string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[token] >= maxStreamsPerSession {
		return false
	}
	c.n[token]++
	return true
}

// release gives back a place acquire took.
func (c *streamCounts) release(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[token]--; c.n[token] <= 0 {
		delete(c.n, token)
	}
}

// shutdownWatch tells streams that their http.Server is shutting down.
// Shutdown waits for every request in flight, and a stream never ends by
// itself: without this, each open dashboard would hold a graceful
// shutdown until its deadline. An ended stream reconnects, to a replica
// that is still up.
type shutdownWatch struct {
	mu   sync.Mutex
	done map[*http.Server]chan struct{}
}

// of returns a channel closed when the server serving r begins to shut
// down; nil (never ready) when r carries no server.
func (sw *shutdownWatch) of(r *http.Request) <-chan struct{} {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		return nil
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	ch := sw.done[srv]
	if ch == nil {
		ch = make(chan struct{})
		sw.done[srv] = ch
		srv.RegisterOnShutdown(func() {
			sw.mu.Lock()
			defer sw.mu.Unlock()
			close(ch)
			delete(sw.done, srv)
		})
	}
	return ch
}

// writeEvent appends one Server-Sent Event, data split into lines. Any
// line break (CR, LF or both) ends a data line, so none can end the event
// early or start a field.
func writeEvent(buf *bytes.Buffer, name, data string) {
	buf.WriteString("event: " + name + "\n")
	data = strings.ReplaceAll(data, "\r\n", "\n")
	data = strings.ReplaceAll(data, "\r", "\n")
	for line := range strings.SplitSeq(data, "\n") {
		buf.WriteString("data: ")
		buf.WriteString(line)
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
}

// renderLive reads and renders the live regions of a period's dashboard.
func (s *Server) renderLive(ctx context.Context, p auth.Period) (liveFrame, error) {
	v, err := s.loadDashboard(ctx, dashboardQuery{period: p})
	if err != nil {
		return liveFrame{}, err
	}
	var f liveFrame
	for _, part := range []struct {
		dst *string
		c   templ.Component
	}{
		{&f.live, templates.DashboardLive(v.live)},
		{&f.lockouts, templates.DashboardLockouts(v.lockouts)},
		{&f.events, templates.DashboardEvents(v.events)},
	} {
		var b strings.Builder
		if err := part.c.Render(ctx, &b); err != nil {
			return liveFrame{}, err
		}
		*part.dst = b.String()
	}
	return f, nil
}

// liveFrame is the rendered live regions of one period.
type liveFrame struct {
	live, lockouts, events string
	// failed: the last read failed, and the regions are the ones read
	// before it.
	failed bool
}

// liveHub reads each watched period's dashboard once per interval, however
// many streams watch it, and hands the result to them. A period nobody
// watches costs nothing: its reader stops with its last stream.
type liveHub struct {
	load     func(context.Context, auth.Period) (liveFrame, error)
	interval time.Duration
	log      *slog.Logger

	mu    sync.Mutex
	feeds map[auth.Period]*liveFeed
}

// liveFeed is one watched period.
type liveFeed struct {
	subs  map[*liveSub]struct{}
	frame liveFrame
	ready bool // frame holds a read
	stop  context.CancelFunc
}

// liveSub is one stream's place in a feed.
type liveSub struct {
	period auth.Period
	// ready holds a token when frame has news; the stream takes the
	// newest frame, so a slow client skips frames rather than queueing
	// them.
	ready chan struct{}
	frame liveFrame
}

func newLiveHub(load func(context.Context, auth.Period) (liveFrame, error), interval time.Duration, log *slog.Logger) *liveHub {
	return &liveHub{load: load, interval: interval, log: log, feeds: map[auth.Period]*liveFeed{}}
}

// subscribe adds a stream to p's feed, starting the feed's reader if it is
// the first. A feed that has read already hands its frame over at once.
func (h *liveHub) subscribe(p auth.Period) *liveSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[p]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &liveFeed{subs: map[*liveSub]struct{}{}, stop: cancel}
		h.feeds[p] = f
		go h.run(ctx, p, f)
	}
	sub := &liveSub{period: p, ready: make(chan struct{}, 1)}
	f.subs[sub] = struct{}{}
	if f.ready {
		sub.frame = f.frame
		sub.ready <- struct{}{}
	}
	return sub
}

// unsubscribe removes a stream; the last one out stops the reader.
func (h *liveHub) unsubscribe(sub *liveSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[sub.period]
	if f == nil {
		return
	}
	delete(f.subs, sub)
	if len(f.subs) == 0 {
		f.stop()
		delete(h.feeds, sub.period)
	}
}

// latest is the newest frame for sub.
func (h *liveHub) latest(sub *liveSub) liveFrame {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sub.frame
}

// run reads p's figures every interval until ctx ends, and passes each
// frame that differs from the last to every stream of the feed.
func (h *liveHub) run(ctx context.Context, p auth.Period, f *liveFeed) {
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	failing := false
	for {
		readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		frame, err := h.load(readCtx, p)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil && !failing {
			h.log.Error("reading the dashboard for live updates", "period", p.String(), "err", err)
		}
		failing = err != nil
		h.mu.Lock()
		if err != nil {
			frame = f.frame
			frame.failed = true
		}
		if !f.ready || frame != f.frame {
			f.frame, f.ready = frame, true
			for sub := range f.subs {
				sub.frame = frame
				select {
				case sub.ready <- struct{}{}:
				default:
				}
			}
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
