package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/cli"
)

func TestCheckTarget(t *testing.T) {
	tests := []struct {
		target  string
		allow   bool
		wantErr string // "" for accepted
	}{
		{"http://127.0.0.1:8080", false, ""},
		{"https://127.9.8.7", false, ""},
		{"http://[::1]:8080", false, ""},
		{"http://[::ffff:127.0.0.1]:8080", false, ""},
		{"http://localhost:8080", false, ""},
		{"http://192.0.2.1", false, "not a loopback address"},
		{"http://[2001:db8::1]:80", false, "not a loopback address"},
		{"http://0.0.0.0:8080", false, "not a loopback address"},
		{"http://192.0.2.1", true, ""},
		{"ftp://127.0.0.1", false, "want an http:// or https:// URL"},
		{"http://", false, "want scheme://host"},
		{"http://user:pw@127.0.0.1", false, "with no user"},
		{"127.0.0.1:8080", false, "want an http:// or https:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			_, err := checkTarget(context.Background(), tt.target, tt.allow)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want accepted", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestGuardedDialerRefusesBeforeConnecting checks that the dialer every
// client uses refuses an address outside loopback itself, so that an
// address learnt later (a cluster's node list) is checked too.
func TestGuardedDialerRefusesBeforeConnecting(t *testing.T) {
	_, err := guardedDialer{}.DialContext(context.Background(), "tcp", "192.0.2.1:6379")
	if !errors.Is(err, errNotLoopback) {
		t.Fatalf("got %v, want errNotLoopback", err)
	}
}

// TestRefusesNonLoopback runs every command that connects somewhere with a
// TEST-NET address (RFC 5737), which is refused before any connection.
func TestRefusesNonLoopback(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"http target", []string{"http", "--target", "http://192.0.2.1"}, "not a loopback address"},
		{"http target by name with a port", []string{"http", "--target", "http://192.0.2.1:8080/"}, "not a loopback address"},
		{"allowed target, loopback sources", []string{"http", "--target", "http://192.0.2.1", "--allow-non-loopback"}, "cannot reach 192.0.2.1"},
		{"distributed target", []string{"distributed", "--target", "http://192.0.2.1"}, "not a loopback address"},
		{"distributed database", []string{"distributed", "--target", "http://127.0.0.1:1", "--database-url", "postgres://postgres@192.0.2.1:5432/xcloak"}, "not a loopback address"},
		{"limiter redis", []string{"limiter", "--redis", "redis://192.0.2.1:6379/0"}, "not a loopback address"},
		{"limiter cluster", []string{"limiter", "--cluster", "127.0.0.1:7000,192.0.2.1:7001"}, "not a loopback address"},
		{"memory redis", []string{"memory", "--redis", "redis://192.0.2.1:6379/0"}, "not a loopback address"},
		{"hello address", []string{"hello", "--addr", "192.0.2.1:8080"}, "not a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := runStuffing(t, tt.args...)
			if err == nil || cli.ExitCode(err) == 0 {
				t.Fatalf("got success, want refusal; stderr %q", stderr)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Fatalf("stderr %q, want it to contain %q", stderr, tt.wantErr)
			}
		})
	}
}
