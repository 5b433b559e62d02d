package requestid_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/xcloak/xcloak/internal/requestid"
)

func TestHandlerAddsTheID(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(requestid.Handler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	id := requestid.New()
	if len(id) != 16 || id == requestid.New() {
		t.Fatalf("New gave %q", id)
	}
	log.InfoContext(requestid.With(context.Background(), id), "with")
	log.InfoContext(context.Background(), "without")
	dec := json.NewDecoder(&buf)
	var with, without map[string]any
	if err := dec.Decode(&with); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&without); err != nil {
		t.Fatal(err)
	}
	if with["request_id"] != id || with["component"] != "test" {
		t.Errorf("record with an ID: %v", with)
	}
	if _, ok := without["request_id"]; ok {
		t.Errorf("record without an ID got one: %v", without)
	}
}

// TestContextIsItsParent: the ID's context carries its parent's values,
// deadline and cancellation, and contexts made from it carry the ID.
func TestContextIsItsParent(t *testing.T) {
	type other struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), other{}, "kept"))
	ctx := requestid.With(parent, "0123456789abcdef")
	child, stop := context.WithCancel(context.WithValue(ctx, other{}, "child"))
	defer stop()
	var buf bytes.Buffer
	slog.New(requestid.Handler(slog.NewJSONHandler(&buf, nil))).InfoContext(child, "child")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["request_id"] != "0123456789abcdef" {
		t.Errorf("a context made from the ID's: %v", rec)
	}
	if ctx.Value(other{}) != "kept" || child.Value(other{}) != "child" {
		t.Errorf("values: %v, %v", ctx.Value(other{}), child.Value(other{}))
	}
	cancel()
	<-child.Done()
	if ctx.Err() != context.Canceled || child.Err() != context.Canceled {
		t.Errorf("after the parent's cancel: %v, %v", ctx.Err(), child.Err())
	}
}
