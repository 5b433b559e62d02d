package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestRedisClusterStopsOnlyItsNodes: scripts/redis-cluster.sh stop ends
// the processes its pid files name only when they are Redis servers: a
// node that ended long ago leaves a pid the system may have given to any
// other process since, which a stop run as root would kill.
func TestRedisClusterStopsOnlyItsNodes(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(repoRoot, "scripts", "redis-cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// A port no node of the benchmarks uses, so that no real node's
	// files are touched.
	const port = 45611
	dir := filepath.Join(repoRoot, ".data", "redis-cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = other.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = other.Process.Kill()
		<-exited
	})
	pidFile := filepath.Join(dir, strconv.Itoa(port)+".pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(pidFile) })

	cmd := exec.Command("bash", script, "stop")
	cmd.Env = append(os.Environ(), "REDIS_CLUSTER_PORT="+strconv.Itoa(port))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	select {
	case <-exited:
		t.Errorf("stop ended process %d, which is no Redis server", other.Process.Pid)
	case <-time.After(100 * time.Millisecond):
	}
}
