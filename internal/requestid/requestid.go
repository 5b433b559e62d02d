// Package requestid carries a request's ID in its context and puts it on
// every log line written with that context, whichever package writes it.
package requestid

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
)

type key struct{}

// New returns a fresh random ID: 16 hex characters. IDs only tell requests
// apart in logs and guard nothing, so they come from the fast
// math/rand/v2 generator, not crypto/rand.
func New() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	c := new(Context)
	c.Set(ctx, id)
	return c
}

// Context is a context carrying an ID, as With returns it. It is a type
// of its own, rather than context.WithValue's, so that a caller can make
// it part of an allocation of its own, and so that the ID is not boxed
// in an interface for every request: a flood of rejected requests pays
// for each allocation. Its zero value is no context yet: Set makes it one.
type Context struct {
	context.Context
	id string
}

// Set makes c parent carrying id. c must not be in use yet.
func (c *Context) Set(parent context.Context, id string) { c.Context, c.id = parent, id }

// Value returns the ID for this package's key and asks the parent for
// any other.
func (c *Context) Value(k any) any {
	if _, ok := k.(key); ok {
		return c.id
	}
	return c.Context.Value(k)
}

// from returns the ID ctx carries, "" if none.
func from(ctx context.Context) string {
	if c, ok := ctx.(*Context); ok {
		return c.id
	}
	id, _ := ctx.Value(key{}).(string)
	return id
}

// Handler wraps h so that every record logged with a context that carries
// an ID gets a request_id attribute.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if id := from(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.Handler.WithGroup(name)} }
