package main

import (
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/cli"
)

func TestRunCommandLine(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string // in stdout
		wantErr  string // in stderr
	}{
		{"no command", nil, 2, "", "no command given"},
		{"unknown command", []string{"attack"}, 2, "", `unknown command "attack"`},
		{"help", []string{"help"}, 0, "Commands:", ""},
		{"command help", []string{"limiter", "--help"}, 0, "-concurrency", ""},
		{"bad flag", []string{"limiter", "--trials", "0"}, 2, "", "--trials 0 out of range"},
		{"stray argument", []string{"limiter", "extra"}, 2, "", `unexpected argument "extra"`},
		{"redis and cluster", []string{"limiter", "--redis", "redis://127.0.0.1:6379/0", "--cluster", "127.0.0.1:7000"}, 2, "", "not both"},
		{"concurrency above the cap", []string{"limiter", "--concurrency", "10001"}, 2, "", "above 10000"},
		{"duration above the cap", []string{"http", "--target", "http://127.0.0.1:1", "--duration", "11m"}, 2, "", "--duration 11m0s out of range"},
		{"no target", []string{"http"}, 2, "", "--target is required"},
		{"bad email pattern", []string{"http", "--target", "http://127.0.0.1:1", "--email-pattern", "user@example.com"}, 2, "", "exactly one %d"},
		{"legit email without password", []string{"http", "--target", "http://127.0.0.1:1", "--legit-email", "a@example.com"}, 2, "", "together"},
		{"legit source among the attackers", []string{"http", "--target", "http://127.0.0.1:1", "--legit-source", "127.0.1.7"}, 2, "", "is one of the attack's sources"},
		{"plot without input", []string{"plot"}, 2, "", "--in"},
		{"distributed without target", []string{"distributed"}, 2, "", "--target is required"},
		{"distributed roles past the accounts", []string{"distributed", "--target", "http://127.0.0.1:1", "--accounts", "10", "--leaked", "5", "--returning", "5", "--new-device", "1"}, 2, "", "each is a different account"},
		{"distributed bad tag", []string{"distributed", "--target", "http://127.0.0.1:1", "--tag", "A%"}, 2, "", "--tag"},
		{"distributed past the networks", []string{"distributed", "--target", "http://127.0.0.1:1", "--accounts", "100000", "--unknown", "100000", "--per-address", "1", "--per-network", "1"}, 2, "", "/24s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runStuffing(t, tt.args...)
			if got := cli.ExitCode(err); got != tt.wantCode {
				t.Errorf("exit code %d, want %d (err %v, stderr %q)", got, tt.wantCode, err, stderr)
			}
			if !strings.Contains(stdout, tt.wantOut) {
				t.Errorf("stdout %q, want it to contain %q", stdout, tt.wantOut)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tt.wantErr)
			}
		})
	}
}
