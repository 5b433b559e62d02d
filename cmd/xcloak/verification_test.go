package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// TestVerificationSettings: XCLOAK_NEW_DEVICE_VERIFICATION and
// XCLOAK_VERIFICATION_TTL reach the service's configuration, default to
// attack and 15m, and a mode that is not attack, always or never is
// refused with the variable's name.
func TestVerificationSettings(t *testing.T) {
	load := func(vars map[string]string, args ...string) (config, error) {
		var stdout, stderr bytes.Buffer
		return loadConfig(flag.NewFlagSet("test", flag.ContinueOnError), args, env(vars), &stdout, &stderr, forServe)
	}
	c, err := load(nil)
	if err != nil || c.Auth.NewDeviceVerification != auth.VerifyInAttack || c.Auth.VerificationTTL != 15*time.Minute {
		t.Fatalf("defaults: %q, %v (%v); want attack, 15m", c.Auth.NewDeviceVerification, c.Auth.VerificationTTL, err)
	}
	c, err = load(map[string]string{"XCLOAK_NEW_DEVICE_VERIFICATION": "always"}, "--verification-ttl", "5m")
	if err != nil || c.Auth.NewDeviceVerification != auth.VerifyAlways || c.Auth.VerificationTTL != 5*time.Minute {
		t.Fatalf("set: %q, %v (%v); want always, 5m", c.Auth.NewDeviceVerification, c.Auth.VerificationTTL, err)
	}
	if _, err := load(map[string]string{"XCLOAK_NEW_DEVICE_VERIFICATION": "sometimes"}); err == nil || !strings.Contains(err.Error(), "XCLOAK_NEW_DEVICE_VERIFICATION") {
		t.Fatalf("an unknown mode: %v, want an error naming the variable", err)
	}
	if _, err := load(nil, "--verification-ttl", "0s"); err == nil || !strings.Contains(err.Error(), "verification-ttl") {
		t.Fatalf("a zero lifetime: %v, want an error naming the flag", err)
	}
}
