package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// StartProxy starts a proxy on a free loopback port and returns the port
// once it listens. start makes the command for a port and returns what the
// proxy logged so far. Ports are drawn below Linux's ephemeral range,
// which the tests' own connections use; a port taken meanwhile by another
// process is tried again with another. The deadline only keeps a broken
// proxy from hanging the test.
func StartProxy(t testing.TB, start func(port int) (*exec.Cmd, func() string)) int {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := proxyPort(t)
		cmd, logs := start(port)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				conn.Close()
				return port
			}
			select {
			case <-exited:
				if attempt < 5 && strings.Contains(strings.ToLower(logs()), "address already in use") {
					break
				}
				t.Fatalf("the proxy ended: %s", logs())
			default:
				if time.Now().After(deadline) {
					t.Fatalf("the proxy does not listen: %v\n%s", err, logs())
				}
				continue
			}
			break
		}
	}
}

// LockedWriter collects a process's output for the test to read while the
// process still writes it.
type LockedWriter struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (w *LockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *LockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// proxyPort returns a TCP port of 127.0.0.1 that was free a moment ago.
func proxyPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		port := 23000 + rand.IntN(9000)
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free port in 23000-31999")
	return 0
}
