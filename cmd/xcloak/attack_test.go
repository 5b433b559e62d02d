package main

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/attack"
)

// TestAttackSettings: every attack setting reaches the config, and a value
// out of range is refused with the setting's name.
func TestAttackSettings(t *testing.T) {
	load := func(env map[string]string, args ...string) (config, error) {
		var stdout, stderr bytes.Buffer
		return loadConfig(flag.NewFlagSet("test", flag.ContinueOnError), args, func(k string) string { return env[k] }, &stdout, &stderr, forServe)
	}
	got, err := load(map[string]string{
		"XCLOAK_ATTACK_WINDOW": "20s", "XCLOAK_ATTACK_FAILURES": "60", "XCLOAK_ATTACK_UNKNOWN_ACCOUNTS": "40",
		"XCLOAK_ATTACK_FACTOR": "2.5", "XCLOAK_ATTACK_LONG_WINDOW": "20m", "XCLOAK_ATTACK_LONG_FAILURES": "900",
		"XCLOAK_ATTACK_LONG_UNKNOWN_ACCOUNTS": "500", "XCLOAK_ATTACK_MAX_FACTOR": "50",
	}, "--attack-quiet", "1h")
	if err != nil {
		t.Fatal(err)
	}
	want := attack.Config{Window: 20 * time.Second, Failures: 60, UnknownAccounts: 40, Factor: 2.5, Quiet: time.Hour,
		LongWindow: 20 * time.Minute, LongFailures: 900, LongUnknownAccounts: 500, MaxFactor: 50}
	if got.Attack != want {
		t.Fatalf("attack config %+v, want %+v", got.Attack, want)
	}
	for env, value := range map[string]string{
		"XCLOAK_ATTACK_WINDOW":                "1500ms",
		"XCLOAK_ATTACK_FAILURES":              "0",
		"XCLOAK_ATTACK_UNKNOWN_ACCOUNTS":      "many",
		"XCLOAK_ATTACK_FACTOR":                "0.5",
		"XCLOAK_ATTACK_QUIET":                 "48h",
		"XCLOAK_ATTACK_LONG_WINDOW":           "90s",
		"XCLOAK_ATTACK_LONG_FAILURES":         "-1",
		"XCLOAK_ATTACK_LONG_UNKNOWN_ACCOUNTS": "few",
		"XCLOAK_ATTACK_MAX_FACTOR":            "0.9",
	} {
		if _, err := load(map[string]string{env: value}); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%s: err %v; want an error naming it", env, value, err)
		}
	}
	if _, err := load(map[string]string{"XCLOAK_ATTACK_WINDOW": "6m"}); err == nil {
		t.Error("a window past 5m is accepted")
	}
	if _, err := load(map[string]string{"XCLOAK_ATTACK_LONG_WINDOW": "31m"}); err == nil {
		t.Error("a long window past 30m is accepted")
	}
	if _, err := load(map[string]string{"XCLOAK_ATTACK_WINDOW": "2m", "XCLOAK_ATTACK_LONG_WINDOW": "2m"}); err == nil {
		t.Error("a long window no longer than the window is accepted")
	}
	got, err = load(map[string]string{"XCLOAK_ATTACK_LONG_WINDOW": "0"})
	if err != nil || got.Attack.LongWindow != 0 {
		t.Errorf("XCLOAK_ATTACK_LONG_WINDOW=0: long window %s, err %v; want it off", got.Attack.LongWindow, err)
	}
}

// TestAttackModeMetricAndLog: serve exposes xcloak_attack_mode, 0 until
// sign-ins for unknown accounts pass XCLOAK_ATTACK_UNKNOWN_ACCOUNTS, then
// 1, and logs one WARN line when attack mode comes on.
func TestAttackModeMetricAndLog(t *testing.T) {
	vars := storeSettings(t)
	vars["XCLOAK_METRICS_ADDR"] = "main"
	vars["XCLOAK_ATTACK_UNKNOWN_ACCOUNTS"] = "3"
	s := startServe(t, vars)
	if status, body := fetch(t, s.base+"/metrics"); status != 200 || !strings.Contains(body, "\nxcloak_attack_mode 0\n") {
		t.Fatalf("/metrics: %d, no xcloak_attack_mode 0", status)
	}
	for i := range 3 {
		signIn(t, s.base, fmt.Sprintf("nobody%d@example.com", i), fmt.Sprint("guess number ", i))
	}
	if status, body := fetch(t, s.base+"/metrics"); status != 200 || !strings.Contains(body, "\nxcloak_attack_mode 1\n") {
		t.Fatalf("/metrics: %d, no xcloak_attack_mode 1 after the attack", status)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	var on int
	for line := range strings.SplitSeq(s.stderr.String(), "\n") {
		if strings.Contains(line, `"msg":"attack mode on"`) {
			on++
			if !strings.Contains(line, `"level":"WARN"`) || !strings.Contains(line, `"trigger":"automatic"`) {
				t.Errorf("attack mode's log line: %s", line)
			}
		}
	}
	if on != 1 {
		t.Errorf("%d lines say attack mode came on, want 1:\n%s", on, s.stderr.String())
	}
}
