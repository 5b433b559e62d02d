package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterMasters is how many masters the started cluster has: the
	// smallest cluster redis-cli agrees to create.
	clusterMasters = 3
	// clusterReadyTimeout bounds the wait for a created cluster to agree on
	// its slots.
	clusterReadyTimeout = 30 * time.Second
	// clusterProbeKeys is how many keys (spread over many slots) must be
	// writable before the cluster counts as ready.
	clusterProbeKeys = 50
	// stopGrace is how long a node gets to exit after SIGTERM.
	stopGrace = 5 * time.Second
	// Client ports are drawn from [portLow, portHigh) so that the bus port
	// (client port + busOffset) stays below Linux's default ephemeral range,
	// where outgoing connections could take it between the check and the bind.
	portLow   = 20000
	portHigh  = 22768
	busOffset = 10000
	// startAttempts is how often a cluster start is tried with fresh ports
	// when a node dies before answering, the sign of a port taken meanwhile.
	startAttempts = 3
)

// cluster is the Redis Cluster this process started, shared by every test
// in it, because starting one takes seconds.
var cluster struct {
	once  sync.Once
	addrs []string
	took  time.Duration
	err   error

	mu    sync.Mutex // guards nodes and dir against Main stopping them
	nodes []*clusterNode
	dir   string
}

// clusterNode is one running redis-server.
type clusterNode struct {
	port int
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
}

func (n *clusterNode) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// Main runs the tests of a package, stops every server this package started
// for them (the Redis Cluster), and exits with the tests' code. Use it as
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Without it a started cluster still dies with the test process, but its
// temporary directory is left behind.
func Main(m *testing.M) {
	code := m.Run()
	stopCluster()
	os.Exit(code)
}

// ClusterAddrs returns the seed addresses of a Redis Cluster with three
// masters. They come from XCLOAK_TEST_REDIS_CLUSTER (comma-separated
// host:port) when it is set; otherwise a cluster is started from
// redis-server on loopback ports, once per test process, and every later
// call returns the same one. A cluster that cannot be started fails the test
// with the tail of the nodes' logs.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	if v := os.Getenv("XCLOAK_TEST_REDIS_CLUSTER"); v != "" {
		var addrs []string
		for a := range strings.SplitSeq(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 {
			t.Fatalf("testenv: XCLOAK_TEST_REDIS_CLUSTER=%q names no host:port", v)
		}
		return addrs
	}

	first := false
	cluster.once.Do(func() {
		first = true
		start := time.Now()
		cluster.addrs, cluster.err = startCluster()
		cluster.took = time.Since(start)
	})
	if cluster.err != nil {
		t.Fatalf("testenv: starting a Redis Cluster: %v", cluster.err)
	}
	if first {
		t.Logf("testenv: Redis Cluster with %d masters ready at %s after %s",
			clusterMasters, strings.Join(cluster.addrs, ","), cluster.took.Round(time.Millisecond))
	}
	return append([]string(nil), cluster.addrs...)
}

// RedisCluster returns a client to the cluster at [ClusterAddrs] and a key
// prefix unique to this test, like [Redis]. The prefix holds no braces, so
// callers may append a hash tag to keep related keys in one slot.
//
// When the test ends, every key starting with the prefix is deleted from
// every master and the client is closed.
func RedisCluster(t testing.TB) (*redis.ClusterClient, string) {
	t.Helper()
	addrs := ClusterAddrs(t)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		t.Fatalf("testenv: cannot reach the Redis Cluster at %s: %v", strings.Join(addrs, ","), err)
	}

	prefix := newPrefix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		err := client.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
			return deletePrefixed(ctx, master, prefix, false)
		})
		if err != nil {
			t.Errorf("testenv: deleting Redis Cluster keys %s*: %v", prefix, err)
		}
		_ = client.Close()
	})
	return client, prefix
}

// startCluster starts the nodes, joins them into a cluster and waits until
// it serves keys. On failure nothing is left running.
func startCluster() ([]string, error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not on PATH: install the Debian package redis-server "+
				"(apt-get install redis-server) or set XCLOAK_TEST_REDIS_CLUSTER to a running cluster", bin)
		}
	}

	var err error
	for range startAttempts {
		var retry bool
		var addrs []string
		addrs, retry, err = tryStartCluster()
		if err == nil {
			return addrs, nil
		}
		if !retry {
			break
		}
	}
	return nil, err
}

// tryStartCluster makes one attempt on fresh ports. retry reports whether a
// node died before answering, which new ports may fix.
func tryStartCluster() (addrs []string, retry bool, err error) {
	ports, err := freePorts(clusterMasters)
	if err != nil {
		return nil, false, err
	}
	dir, err := os.MkdirTemp("", "xcloak-redis-cluster-")
	if err != nil {
		return nil, false, err
	}
	cluster.mu.Lock()
	cluster.dir = dir
	cluster.mu.Unlock()

	fail := func(retry bool, err error) ([]string, bool, error) {
		tail := logTail(dir, ports)
		stopCluster()
		return nil, retry, fmt.Errorf("%w\n%s", err, tail)
	}

	var nodes []*clusterNode
	for _, port := range ports {
		n, err := startNode(dir, port)
		if err != nil {
			return fail(false, err)
		}
		nodes = append(nodes, n)
		cluster.mu.Lock()
		cluster.nodes = nodes
		cluster.mu.Unlock()
		addrs = append(addrs, n.addr())
	}

	for _, n := range nodes {
		if err := waitForPing(n, 10*time.Second); err != nil {
			select {
			case <-n.done:
				return fail(true, err)
			default:
				return fail(false, err)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		return fail(false, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out))
	}

	if err := waitForCluster(addrs, clusterReadyTimeout); err != nil {
		return fail(false, err)
	}
	return addrs, false, nil
}

// freePorts picks n client ports that are free on loopback, each with its
// cluster bus port free too.
func freePorts(n int) ([]int, error) {
	var ports []int
	taken := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("no free port pair found in %d-%d", portLow, portHigh)
		}
		p := portLow + rand.IntN(portHigh-portLow)
		if taken[p] || !portFree(p) || !portFree(p+busOffset) {
			continue
		}
		taken[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// portFree reports whether a listener can bind 127.0.0.1:port right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// startNode starts one cluster-enabled redis-server with its files in dir.
func startNode(dir string, port int) (*clusterNode, error) {
	p := strconv.Itoa(port)
	out, err := os.Create(filepath.Join(dir, p+".out"))
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child holds its own descriptor

	cmd := exec.Command("redis-server",
		"--port", p,
		"--bind", "127.0.0.1",
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes-"+p+".conf",
		"--cluster-node-timeout", "5000",
		"--appendonly", "no",
		"--save", "",
		"--dir", dir,
		"--logfile", filepath.Join(dir, p+".log"),
		"--daemonize", "no",
	)
	cmd.Dir = dir
	cmd.Stdout = out // catches what redis-server says before it opens its log
	cmd.Stderr = out
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server on port %d: %w", port, err)
	}
	n := &clusterNode{port: port, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(n.done)
	}()
	return n, nil
}

// waitForPing polls a node until it answers PING, it exits, or timeout passes.
func waitForPing(n *clusterNode, timeout time.Duration) error {
	client := redis.NewClient(&redis.Options{
		Addr:        n.addr(),
		DialTimeout: 500 * time.Millisecond,
		MaxRetries:  -1,
	})
	defer client.Close()

	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-n.done:
			return fmt.Errorf("redis-server on port %d exited before answering PING", n.port)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d did not answer PING within %s: %v", n.port, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForCluster polls until every node reports a healthy cluster that
// knows all nodes and a fresh cluster client can write keys across many
// slots. Right after creation nodes may still disagree on slot owners, and
// the first commands would fail with MOVED loops or CLUSTERDOWN.
func waitForCluster(addrs []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := clusterReady(addrs)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ready within %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clusterReady returns why the cluster is not ready yet, or nil.
func clusterReady(addrs []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	for _, addr := range addrs {
		node := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		info, err := node.ClusterInfo(ctx).Result()
		_ = node.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", addr, err)
		}
		for _, want := range []string{"cluster_state:ok", "cluster_known_nodes:" + strconv.Itoa(len(addrs))} {
			if !strings.Contains(info, want) {
				return fmt.Errorf("CLUSTER INFO on %s lacks %s", addr, want)
			}
		}
	}

	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer client.Close()
	for i := range clusterProbeKeys {
		// A changing hash tag spreads the probes over many slots.
		key := fmt.Sprintf("testenv-probe:{%d}", i)
		if err := client.Set(ctx, key, i, time.Minute).Err(); err != nil {
			return fmt.Errorf("SET %s: %w", key, err)
		}
		got, err := client.Get(ctx, key).Int()
		if err != nil {
			return fmt.Errorf("GET %s: %w", key, err)
		}
		if got != i {
			return fmt.Errorf("GET %s = %d, want %d", key, got, i)
		}
		if err := client.Del(ctx, key).Err(); err != nil {
			return fmt.Errorf("DEL %s: %w", key, err)
		}
	}
	return nil
}

// stopCluster stops the started nodes (SIGTERM, then SIGKILL after
// stopGrace) and removes their directory. It is safe to call when nothing
// was started.
func stopCluster() {
	cluster.mu.Lock()
	defer cluster.mu.Unlock()

	for _, n := range cluster.nodes {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range cluster.nodes {
		select {
		case <-n.done:
		case <-time.After(stopGrace):
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
	cluster.nodes = nil

	if cluster.dir != "" {
		_ = os.RemoveAll(cluster.dir)
		cluster.dir = ""
	}
}

// logTail returns the last lines each node wrote, to explain a failed start.
func logTail(dir string, ports []int) string {
	const lines = 20
	var b strings.Builder
	for _, port := range ports {
		for _, name := range []string{strconv.Itoa(port) + ".out", strconv.Itoa(port) + ".log"} {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(&b, "--- %s: %v\n", name, err)
				continue
			}
			data = bytes.TrimSpace(data)
			if len(data) == 0 {
				continue
			}
			all := strings.Split(string(data), "\n")
			if len(all) > lines {
				all = all[len(all)-lines:]
			}
			fmt.Fprintf(&b, "--- tail of %s:\n%s\n", name, strings.Join(all, "\n"))
		}
	}
	if b.Len() == 0 {
		return "(the nodes wrote no log)"
	}
	return b.String()
}

// PauseWrites holds the writes of every client of the cluster master that
// holds key for d (CLIENT PAUSE WRITE), as a slow script or a paused
// machine would hold them past a client's read timeout. It goes through a
// client of its own, which no hook of c's sees, and may be called from any
// goroutine. The pause ends after d, when the returned function is
// called, or when the test ends; errors fail the test.
func PauseWrites(t testing.TB, c *redis.ClusterClient, key string, d time.Duration) (unpause func()) {
	t.Helper()
	ctx := context.Background()
	node, err := c.MasterForKey(ctx, key)
	if err != nil {
		t.Errorf("testenv: the master of %q: %v", key, err)
		return func() {}
	}
	admin := redis.NewClient(&redis.Options{Addr: node.Options().Addr})
	if err := admin.Do(ctx, "CLIENT", "PAUSE", d.Milliseconds(), "WRITE").Err(); err != nil {
		admin.Close()
		t.Errorf("testenv: pausing %s: %v", node.Options().Addr, err)
		return func() {}
	}
	var once sync.Once
	unpause = func() {
		once.Do(func() {
			defer admin.Close()
			if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
				t.Errorf("testenv: unpausing %s: %v", node.Options().Addr, err)
			}
		})
	}
	t.Cleanup(unpause)
	return unpause
}
