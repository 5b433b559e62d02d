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
