package app

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTakeBackReport: every failed take-back is counted by its rule, and
// a burst of them is one warning, which names neither key nor identity.
func TestTakeBackReport(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	report, err := takeBackReport(slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		report("login_account", errors.New("context deadline exceeded"))
	}
	report("login_ip", errors.New("context deadline exceeded"))

	want := `
# HELP xcloak_limiter_take_backs_failed_total Admissions a decision split over Redis Cluster slots could not take back after another rule rejected it, by rule; each counts against its rule until it leaves the window.
# TYPE xcloak_limiter_take_backs_failed_total counter
xcloak_limiter_take_backs_failed_total{rule="login_account"} 3
xcloak_limiter_take_backs_failed_total{rule="login_ip"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "xcloak_limiter_take_backs_failed_total"); err != nil {
		t.Error(err)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings for a burst of failures, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "rule=login_account") {
		t.Errorf("the warning does not name the rule:\n%s", logs.String())
	}
}
