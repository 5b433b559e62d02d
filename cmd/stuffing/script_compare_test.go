package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
)

// limiterScript is the limiter's script as the repository holds it.
const limiterScript = "../../ratelimit/sliding_window.lua"

// TestScriptCompare: two scripts, each run in both shapes every round,
// with every figure read from Redis, and the first script's ratios 1. The
// run succeeding is itself the check that the shapes' keys and packed
// rules are what sliding_window.lua accepts: it answers anything else
// with an error, which ends the run.
func TestScriptCompare(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	stdout, stderr, err := runStuffing(t, "script-compare", "--json", "--redis", testenv.RedisURL(), "--key-prefix", prefix,
		"--script", "a="+limiterScript, "--script", "b="+limiterScript,
		"--rounds", "3", "--duration", "20ms", "--clients", "2", "--keys", "30", "--seed", "42")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep scriptCompareReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if rep.Seed != 42 || rep.Rounds != 3 || len(rep.Orders) != 3 {
		t.Fatalf("report %+v: want seed 42 and 3 rounds", rep)
	}
	var names []string
	for _, c := range rep.Contenders {
		names = append(names, c.Name)
		if len(c.Rates) != 3 || c.MedianRate <= 0 || c.MedianScriptMicros <= 0 || c.MedianCPUMicros <= 0 {
			t.Errorf("%s: rates %v, script µs %v, CPU µs %v; want 3 rounds, every median positive", c.Name, c.Rates, c.ScriptMicros, c.CPUMicros)
		}
		if strings.HasPrefix(c.Name, "a/") && (c.RateVsFirst != 1 || c.ScriptVsFirst != 1) {
			t.Errorf("%s, the first script: ratios %v and %v, want 1", c.Name, c.RateVsFirst, c.ScriptVsFirst)
		}
		if strings.HasPrefix(c.Name, "b/") && (c.RateVsFirst <= 0 || c.ScriptVsFirst <= 0) {
			t.Errorf("%s: ratios %v and %v, want positive", c.Name, c.RateVsFirst, c.ScriptVsFirst)
		}
	}
	if got := strings.Join(names, " "); got != "a/allow a/signin b/allow b/signin" {
		t.Errorf("contenders %s, want each script in both shapes", got)
	}
	for _, order := range rep.Orders {
		if len(order) != 4 {
			t.Errorf("round order %v, want every contender once", order)
		}
	}
	assertNoKeys(t, rdb, prefix)
}

// TestScriptCompareText: the report as text has a row per contender.
func TestScriptCompareText(t *testing.T) {
	_, prefix := testenv.Redis(t)
	stdout, stderr, err := runStuffing(t, "script-compare", "--redis", testenv.RedisURL(), "--key-prefix", prefix,
		"--script", "only="+limiterScript, "--rounds", "1", "--duration", "20ms", "--clients", "1", "--keys", "1", "--seed", "7")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, w := range []string{"only/allow", "only/signin", "script µs/call", "Redis CPU µs/decision", "deleted"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("report lacks %q:\n%s", w, stdout)
		}
	}
}

// TestScriptCompareBadScript: a script that fails is named, and the run
// ends with an error, its keys deleted.
func TestScriptCompareBadScript(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	bad := filepath.Join(t.TempDir(), "bad.lua")
	if err := os.WriteFile(bad, []byte("return redis.error_reply('ERR not a limiter')"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runStuffing(t, "script-compare", "--redis", testenv.RedisURL(), "--key-prefix", prefix,
		"--script", "good="+limiterScript, "--script", "bad="+bad, "--rounds", "1", "--duration", "20ms", "--clients", "1", "--keys", "1")
	if err == nil || !strings.Contains(stderr, "bad/allow") || !strings.Contains(stderr, "not a limiter") {
		t.Fatalf("err %v, stderr %q; want the failing contender and Redis' error", err, stderr)
	}
	assertNoKeys(t, rdb, prefix)
}

func TestScriptCompareFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--script", "noequals"},
		{"--script", "a="},
		{"--script", "A/b=" + limiterScript},
		{"--script", "a=" + limiterScript, "--script", "a=" + limiterScript},
		{"--script", "a=/no/such/file.lua"},
		{"--script", "a=/dev/zero"},
		{"--script", "a=" + limiterScript, "--rounds", "0"},
		{"--script", "a=" + limiterScript, "--clients", "0"},
		{"--script", "a=" + limiterScript, "--keys", "2000000"},
		{"--script", "a=" + limiterScript, "--limit", "0"},
		{"--script", "a=" + limiterScript, "--duration", "1ms"},
		{"--script", "a=" + limiterScript, "--key-prefix", "a{b}"},
		{"--script", "a=" + limiterScript, "--redis", "redis://192.0.2.1:6379/15"},
	} {
		_, stderr, err := runStuffing(t, append([]string{"script-compare"}, args...)...)
		if err == nil || !strings.Contains(stderr, "stuffing") {
			t.Errorf("script-compare %v: %v, %q; want a clear error", args, err, stderr)
		}
	}
}
