package main

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRedisClientLogsJSONLines: go-redis' own messages (here the pool's
// failed dials) are lines of the service's JSON log, not plain text on
// stderr among them.
func TestRedisClientLogsJSONLines(t *testing.T) {
	// A port nothing listens on: closed as soon as it was taken.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	var out lockedBuffer
	redis.SetLogger(redisLogger{newLogger(&out, slog.LevelWarn)})
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(t.Context()).Err(); err == nil {
		t.Fatal("ping of a closed port answered")
	}
	found := false
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var line struct{ Msg, Detail string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a line of the log is not JSON: %q", sc.Text())
		}
		found = found || line.Msg == "redis client" && strings.Contains(line.Detail, addr)
	}
	if !found {
		t.Fatalf("no line of the log says the dial to %s failed:\n%s", addr, out.String())
	}
}
