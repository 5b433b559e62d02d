package auth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestAPIKeyReloadOutlivesItsCaller: the list of keys in force is
// reloaded for whichever check finds it old, but not on that check's
// behalf. A client that hangs up at once, every second for more than the
// minute the last list may answer for, neither fails the reloads nor
// holds them off: a key in force is still taken, and one revoked is
// refused within the refresh.
func TestAPIKeyReloadOutlivesItsCaller(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	key, _, err := f.svc.AddAPIKey(ctx, "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := f.svc.AddAPIKey(ctx, "blog", "cli")
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	stranger := auth.APIKeyPrefix + strings.Repeat("B", len(key)-len(auth.APIKeyPrefix))
	for i := range 70 {
		f.advance(time.Second)
		// Hung up: its answer matters to no one.
		_, _ = f.svc.CheckAPIKey(gone, client("192.0.2.9"), stranger)
		if i == 65 {
			if err := f.svc.RevokeAPIKey(ctx, "blog", "cli"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if k, err := f.svc.CheckAPIKey(ctx, client("192.0.2.10"), key); err != nil || k.Name != "shop" {
		t.Errorf("a key in force after a minute of hung-up checks: %+v, %v", k, err)
	}
	f.advance(time.Second)
	if _, err := f.svc.CheckAPIKey(ctx, client("192.0.2.10"), other); err == nil {
		t.Error("a revoked key is still taken")
	}
}
