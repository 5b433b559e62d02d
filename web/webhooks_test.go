package web_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/xcloak/xcloak/counters"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestDashboardShowsWebhooksDropped: drops two replicas' senders counted
// in the shared counters are on the dashboard's page and in its JSON.
func TestDashboardShowsWebhooksDropped(t *testing.T) {
	env := xcloaktest.New(t, xcloaktest.Options{})
	base := env.Start(t)
	env.AddUser(t, adminEmail, anyPassword, true)
	admin := xcloaktest.Client(t, "127.0.7.5")
	signIn(t, admin, base, adminEmail, anyPassword)
	for _, n := range []int64{2, 5} { // one count per replica
		stats, err := counters.New(env.Redis, env.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		if err := stats.CountWebhooksDropped(t.Context(), time.Now(), n); err != nil {
			t.Fatal(err)
		}
	}
	_, body := getStats(t, admin, base, "5m")
	var got struct {
		WebhooksDropped int64 `json:"webhooks_dropped"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.WebhooksDropped != 7 {
		t.Errorf("stats webhooks_dropped = %d, want 7", got.WebhooksDropped)
	}
	_, page := get(t, admin, base+"/admin?period=5m")
	if n := pageFigures(t, page)["webhooks_dropped"]; n != "7" {
		t.Errorf("the dashboard shows %q webhooks not sent, want 7", n)
	}
}
