package main

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestComposeRedisKeepsLockoutsWhenKilled runs redis-server with the compose
// service's command, writes a key with an expiry as a lockout is written,
// kills the server without letting it save, and starts it again on the same
// directory: the key is still there. The same run without the service's
// arguments loses it, so the arguments are what keep it.
func TestComposeRedisKeepsLockoutsWhenKilled(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed")
	}
	command := mustService(t, mustLoadCompose(t, nil), "redis").Command
	if len(command) == 0 || command[0] != "redis-server" {
		t.Fatalf("redis command = %q, want redis-server and its arguments", command)
	}
	for _, tt := range []struct {
		name  string
		args  []string
		keeps bool
	}{
		{"the compose arguments", command[1:], true},
		{"no arguments", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := startRedisServer(t, dir, tt.args)
			const key = "xcloak:lockout:account:test"
			if err := s.client.Set(t.Context(), key, "1", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			s.kill(t)

			s = startRedisServer(t, dir, tt.args)
			ttl, err := s.client.TTL(t.Context(), key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if kept := ttl > 0; kept != tt.keeps {
				t.Errorf("after a kill, the key's TTL is %s; want it kept: %v", ttl, tt.keeps)
			}
		})
	}
}

type redisProcess struct {
	cmd    *exec.Cmd
	done   chan struct{}
	client *redis.Client
}

// startRedisServer starts redis-server with args on a free loopback port,
// keeping its files in dir, and waits until it answers.
func startRedisServer(t *testing.T, dir string, args []string) *redisProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	all := append(slices.Clone(args), "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no")
	cmd := exec.Command("redis-server", all...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &redisProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	p.client = redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), MaxRetries: -1})
	t.Cleanup(func() { p.kill(t) })
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		err := p.client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("redis-server %q exited: %v (log in %s)", all, err, dir)
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill ends the server with SIGKILL, as a crash or an OOM kill would: it
// saves nothing on the way out.
func (p *redisProcess) kill(t *testing.T) {
	t.Helper()
	_ = p.client.Close()
	_ = p.cmd.Process.Kill()
	<-p.done
}
