package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/requestid"
)

// newLogger is serve's logger: JSON lines on w from level up, every line a
// request's context writes carrying its request ID. The audit stream's
// lines (a logger With "log"="audit", see auth.AuditedEvents) are written
// whatever the level: they are the security events' record for a SIEM, not
// diagnostics that XCLOAK_LOG_LEVEL may quiet.
func newLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	inner := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(requestid.Handler(auditLevel{Handler: inner, min: level}))
}

// auditLevel filters records below min, but for a handler whose attributes
// mark the audit stream, which writes from slog.LevelInfo up.
type auditLevel struct {
	slog.Handler
	min   slog.Leveler
	audit bool
}

func (h auditLevel) Enabled(ctx context.Context, l slog.Level) bool {
	if h.audit && l >= slog.LevelInfo {
		return true
	}
	return l >= h.min.Level() && h.Handler.Enabled(ctx, l)
}

func (h auditLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	audit := h.audit
	for _, a := range attrs {
		if a.Key == auth.AuditLogKey && a.Value.String() == auth.AuditLog {
			audit = true
		}
	}
	return auditLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min, audit: audit}
}

func (h auditLevel) WithGroup(name string) slog.Handler {
	return auditLevel{Handler: h.Handler.WithGroup(name), min: h.min, audit: h.audit}
}

// redisLogLevel is the least severe level of go-redis' own messages that
// the log writes: serve's XCLOAK_LOG_LEVEL once serve has read it, warn
// (every one of them) for the commands.
var redisLogLevel slog.LevelVar

// redisLogger writes go-redis' own messages (a pool's dials that failed, a
// connection it dropped) as lines of the service's log, JSON like the
// others, where go-redis would print plain text on stderr. They name
// addresses, never a password. go-redis has one logger a process: main
// sets it, and serve only its level.
type redisLogger struct{ log *slog.Logger }

func newRedisLogger(w io.Writer) redisLogger {
	return redisLogger{newLogger(w, &redisLogLevel)}
}

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
