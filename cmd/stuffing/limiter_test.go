package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
)

// limiterRun runs "stuffing limiter --json" with args and small bursts, and
// returns the rows both typed and as plain JSON objects.
func limiterRun(t *testing.T, args ...string) ([]limiterRow, []map[string]any) {
	t.Helper()
	args = append([]string{"limiter", "--json", "--concurrency", "20,50", "--limits", "3,10", "--trials", "2"}, args...)
	stdout, stderr, err := runStuffing(t, args...)
	if err != nil {
		t.Fatalf("stuffing %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr)
	}
	var rows []limiterRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("stdout is not a JSON array of rows: %v\n%s", err, stdout)
	}
	var objects []map[string]any
	if err := json.Unmarshal([]byte(stdout), &objects); err != nil {
		t.Fatal(err)
	}
	return rows, objects
}

// checkRows checks the rows' shape and that XCloak admitted exactly the
// limit in every trial.
func checkRows(t *testing.T, rows []limiterRow, objects []map[string]any, wantSeed bool) {
	t.Helper()
	if got, want := len(rows), 4; got != want {
		t.Fatalf("got %d rows, want %d (2 concurrency levels x 2 limits)", got, want)
	}
	fields := []string{"concurrency", "limit", "trials", "baseline_admitted", "baseline_trials", "xcloak_admitted", "xcloak_trials", "baseline_ratio", "xcloak_ratio"}
	if wantSeed {
		fields = append(fields, "seed_admitted", "seed_errors", "seed_trials")
	}
	for i, obj := range objects {
		for _, f := range fields {
			if _, ok := obj[f]; !ok {
				t.Errorf("row %d has no %q: %v", i, f, obj)
			}
		}
		if _, ok := obj["seed_admitted"]; ok && !wantSeed {
			t.Errorf("row %d has seed_admitted without --seed-script", i)
		}
	}
	for _, r := range rows {
		t.Run(fmt.Sprintf("concurrency=%d/limit=%d", r.Concurrency, r.Limit), func(t *testing.T) {
			if len(r.XCloakTrials) != 2 || len(r.BaselineTrials) != 2 {
				t.Fatalf("trials: XCloak %v, baseline %v; want 2 each", r.XCloakTrials, r.BaselineTrials)
			}
			for i, n := range r.XCloakTrials {
				if n != r.Limit {
					t.Errorf("trial %d: XCloak admitted %d, want exactly the limit %d", i, n, r.Limit)
				}
			}
			if r.XCloakAdmitted != r.Limit || r.XCloakErrors != 0 || r.BaselineErrors != 0 {
				t.Errorf("XCloak admitted %d with %d errors, baseline %d errors; want %d and no errors",
					r.XCloakAdmitted, r.XCloakErrors, r.BaselineErrors, r.Limit)
			}
			// The baseline is never exact from below: it may over-admit, but it
			// admits at least the limit.
			for i, n := range r.BaselineTrials {
				if n < r.Limit || n > r.Concurrency {
					t.Errorf("trial %d: baseline admitted %d, want %d..%d", i, n, r.Limit, r.Concurrency)
				}
			}
			if wantSeed && (r.SeedErrors == nil || len(r.SeedTrials) != 2) {
				t.Errorf("seed columns missing: errors %v, trials %v", r.SeedErrors, r.SeedTrials)
			}
		})
	}
}

// assertNoKeys fails if any key under prefix is left on any node.
func assertNoKeys(t *testing.T, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	n, err := deletePrefixed(t.Context(), rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d keys under %s left behind, want none", n, prefix)
	}
}

func TestLimiterRedis(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	rows, objects := limiterRun(t, "--redis", testenv.RedisURL(), "--key-prefix", prefix)
	checkRows(t, rows, objects, false)
	assertNoKeys(t, rdb, prefix)
	for _, r := range rows {
		if r.Topology != "redis" {
			t.Errorf("topology %q, want redis", r.Topology)
		}
	}
}

func TestLimiterCluster(t *testing.T) {
	rdb, prefix := testenv.RedisCluster(t)
	addrs := testenv.ClusterAddrs(t)
	rows, objects := limiterRun(t, "--cluster", strings.Join(addrs, ","), "--key-prefix", prefix, "--seed-script")
	checkRows(t, rows, objects, true)
	assertNoKeys(t, rdb, prefix)
	for _, r := range rows {
		if r.Topology != "cluster" {
			t.Errorf("topology %q, want cluster", r.Topology)
		}
	}
}

func TestLimiterTable(t *testing.T) {
	_, prefix := testenv.Redis(t)
	stdout, stderr, err := runStuffing(t, "limiter", "--redis", testenv.RedisURL(), "--key-prefix", prefix,
		"--concurrency", "5", "--limits", "2", "--trials", "1", "--seed-script")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"concurrency", "baseline admitted", "seed script admitted", "XCloak admitted", "1.00x", "deleted"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

func TestWorst(t *testing.T) {
	tests := []struct {
		trials []int
		want   int
		worst  int
	}{
		{[]int{10, 10, 10}, 10, 10},
		{[]int{12, 30, 11}, 10, 30},
		{[]int{9, 10, 11}, 10, 11}, // a tie goes to the over-admission
		{[]int{0, 10}, 10, 0},
	}
	for _, tt := range tests {
		if got := worst(tt.trials, tt.want); got != tt.worst {
			t.Errorf("worst(%v, %d) = %d, want %d", tt.trials, tt.want, got, tt.worst)
		}
	}
}
