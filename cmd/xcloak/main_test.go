package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runMainEnv, set in the environment of the test binary, makes it run
// main with its arguments (TestMain).
const runMainEnv = "XCLOAK_TEST_RUN_MAIN"

// runMain runs xcloak's main, in the test binary started again, with the
// arguments and environment given, and returns its stderr.
func runMain(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe, args...)
	cmd.Env = append(env, runMainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // the exit status is the test's to judge from stderr
	return stderr.Bytes()
}

// TestRedisClientLogsJSONLines: go-redis' own messages (here its pool's
// failed dial) are lines of the JSON log like every other, not plain text
// on stderr among them. go-redis has one logger a process, so main sets
// it, not run, which the tests call many times in one process.
func TestRedisClientLogsJSONLines(t *testing.T) {
	// A port nothing listens on: closed as soon as it was taken.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	out := runMain(t, []string{"XCLOAK_REDIS_URL=redis://" + addr}, "apikey", "list")
	found := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if !bytes.HasPrefix(sc.Bytes(), []byte("{")) {
			continue // the command's own error, printed as text
		}
		var line struct{ Msg, Detail string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a line of the log is not JSON: %q", sc.Text())
		}
		found = found || line.Msg == "redis client" && strings.Contains(line.Detail, addr)
	}
	if !found {
		t.Fatalf("no line of the log says the dial to %s failed:\n%s", addr, out)
	}
	if strings.Contains(string(out), "pool.go") {
		t.Fatalf("go-redis wrote a plain-text line of its own:\n%s", out)
	}
}

// TestRedisLoggerFollowsTheLevel: go-redis' messages are warnings, quiet
// when serve's XCLOAK_LOG_LEVEL is error.
func TestRedisLoggerFollowsTheLevel(t *testing.T) {
	var level slog.LevelVar
	var out bytes.Buffer
	l := redisLogger{newLogger(&out, &level)}
	for _, tt := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelInfo, true}, {slog.LevelWarn, true}, {slog.LevelError, false}} {
		out.Reset()
		level.Set(tt.level)
		l.Printf(t.Context(), "redis: dial %s", "127.0.0.1:1")
		if got := strings.Contains(out.String(), `"detail":"redis: dial 127.0.0.1:1"`); got != tt.want {
			t.Errorf("at level %v: written %v, want %v: %q", tt.level, got, tt.want, out.String())
		}
	}
}
