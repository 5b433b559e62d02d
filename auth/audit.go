package auth

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"
)

// AuditMessage is the message of every line of the audit stream, and
// AuditLog the value of its AuditLogKey ("log") attribute: either tells a
// SIEM which lines of XCloak's log are security events.
const (
	AuditMessage = "security event"
	AuditLogKey  = "log"
	AuditLog     = "audit"
)

// AuditedEvents returns an EventStore that writes to store and then, once
// a batch is written, writes each of its rows to log as one line of the
// audit stream, with stable field names, so that a SIEM can follow the
// security log without reading Postgres. The line is written
// for the row, not for the event: a coalesced rejection or a folded
// summary is one line whose count is the row's, so the stream is bounded
// under a flood exactly as the table is.
//
// The line's own time is the event's (the first one for a row that stands
// for several), so that a late write does not move it. Its fields:
//
//	log      "audit"
//	msg      "security event"
//	event    the kind (EventLoginFailed, ...)
//	account  the normalised email, "" if none
//	user_id  the account's ID, only when it exists
//	source   the client's network, "" if none or if the row folds several
//	rule     the rule that rejected, "" if none
//	count    how many events the row stands for (1 unless coalesced or folded)
//	app      the decision API's application, only when there is one
//	detail   the event's other detail, only when it has some
//
// Detail never holds a secret (see Event.Detail), so neither does the line.
//
// NewService wraps its Deps.Events so when Config.AuditLog is set; the
// other writers of security events (the attack watch) wrap theirs. A nil
// log returns store itself.
func AuditedEvents(store EventStore, log *slog.Logger) EventStore {
	if log == nil {
		return store
	}
	return auditedStore{EventStore: store, stream: auditStream{log: log.With(AuditLogKey, AuditLog)}}
}

type auditedStore struct {
	EventStore
	stream auditStream
}

// InsertEvents writes batch, then its lines: only rows written are
// logged, so that line and row agree one for one, and a batch written
// again after a failure is logged once, by the write that succeeds.
func (s auditedStore) InsertEvents(ctx context.Context, id EventBatchID, batch []Event) error {
	if err := s.EventStore.InsertEvents(ctx, id, batch); err != nil {
		return err
	}
	s.stream.write(batch)
	return nil
}

// auditStream writes rows as lines of the audit stream.
type auditStream struct {
	log *slog.Logger
}

// write writes one line per row of rows.
func (a auditStream) write(rows []Event) {
	ctx := context.Background()
	h := a.log.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	for _, e := range rows {
		// A Record of its own, so that the line's time is the event's, to
		// the microsecond Postgres keeps, so that it is the row's too.
		rec := slog.NewRecord(e.At.UTC().Truncate(time.Microsecond), slog.LevelInfo, AuditMessage, 0)
		rec.AddAttrs(auditAttrs(e)...)
		// A handler's error is the log's own trouble (a full disk, a
		// closed pipe); the row is written either way.
		_ = h.Handle(ctx, rec)
	}
}

// auditAttrs are the fields of e's line after "log".
func auditAttrs(e Event) []slog.Attr {
	detail := e.Detail
	count, several := rowCount(e)
	attrs := []slog.Attr{
		slog.String("event", e.Kind),
		slog.String("account", e.Account),
	}
	if e.UserID != 0 {
		attrs = append(attrs, slog.Int64("user_id", e.UserID))
	}
	attrs = append(attrs,
		slog.String("source", e.Source),
		slog.String("rule", e.Rule),
		slog.Int("count", count),
	)
	app, hasApp := detail["app"]
	if hasApp {
		attrs = append(attrs, slog.String("app", app))
	}
	if hasApp || several {
		detail = maps.Clone(detail)
		delete(detail, "app")
		if several {
			delete(detail, "count")
		}
	}
	if len(detail) > 0 {
		group := make([]any, 0, len(detail))
		for _, name := range slices.Sorted(maps.Keys(detail)) {
			group = append(group, slog.String(name, detail[name]))
		}
		attrs = append(attrs, slog.Group("detail", group...))
	}
	return attrs
}

// rowCount is how many events the row e stands for, and whether its
// detail's "count" says so (CountsEvents). Other events' "count" counts
// something else (the sessions one ended) and stays in the detail.
func rowCount(e Event) (int, bool) {
	_, has := e.Detail["count"]
	return eventCount(e), has && CountsEvents(e.Kind, e.Detail)
}
