package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a standalone redis-server that belongs to one test, so
// that the test may stop and restart it (failure tests) without touching the
// Redis other tests share. It listens on the same loopback port across
// restarts and keeps nothing on disk: a restart loses every key and script,
// as a real crash without persistence does.
type RedisServer struct {
	t    testing.TB
	port int
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// PrivateRedis starts a redis-server for this test; it is stopped when the
// test ends.
func PrivateRedis(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("testenv: redis-server is not on PATH: install the Debian package redis-server")
	}
	s := &RedisServer{t: t, dir: t.TempDir()}
	for tries := 0; s.port == 0; tries++ {
		if tries > 100 {
			t.Fatal("testenv: no free port for a private redis-server")
		}
		if p := portLow + rand.IntN(portHigh-portLow); portFree(p) {
			s.port = p
		}
	}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL returns the server's redis:// URL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Addr returns host:port.
func (s *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the server if it is stopped and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	p := strconv.Itoa(s.port)
	var err error
	for range 50 { // the port may linger briefly after a stop
		cmd := exec.Command("redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"), "--daemonize", "no")
		cmd.SysProcAttr = dieWithParent()
		if err = cmd.Start(); err != nil {
			break
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		if err = pingUntil(s.Addr(), done, 10*time.Second); err == nil {
			s.cmd, s.done = cmd, done
			return
		}
		_ = cmd.Process.Kill()
		<-done
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	s.t.Fatalf("testenv: starting private redis-server on %s: %v\n%s", s.Addr(), err, log)
}

// Stop kills the server at once (SIGKILL, like a crash) and waits for it.
func (s *RedisServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

// pingUntil polls addr until it answers PING, the process exits, or
// timeout passes.
func pingUntil(addr string, exited <-chan struct{}, timeout time.Duration) error {
	client := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
