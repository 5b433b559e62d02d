package testenv_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestRedisURL(t *testing.T) {
	tests := []struct {
		name, test, app, want string
	}{
		{"test variable wins", "redis://t:6379/1", "redis://a:6379/2", "redis://t:6379/1"},
		{"app variable next", "", "redis://a:6379/2", "redis://a:6379/2"},
		{"default last", "", "", "redis://127.0.0.1:6379/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XCLOAK_TEST_REDIS_URL", tt.test)
			t.Setenv("XCLOAK_REDIS_URL", tt.app)
			if got := testenv.RedisURL(); got != tt.want {
				t.Errorf("RedisURL() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDatabaseURL(t *testing.T) {
	tests := []struct {
		name, test, app, want string
	}{
		{"test variable wins", "postgres://t/x", "postgres://a/y", "postgres://t/x"},
		{"app variable next", "", "postgres://a/y", "postgres://a/y"},
		{"default last", "", "", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XCLOAK_TEST_DATABASE_URL", tt.test)
			t.Setenv("XCLOAK_DATABASE_URL", tt.app)
			if got := testenv.DatabaseURL(); got != tt.want {
				t.Errorf("DatabaseURL() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedisIsolatesAndCleansUp(t *testing.T) {
	ctx := context.Background()
	outer, outerPrefix := testenv.Redis(t)
	if err := outer.Set(ctx, outerPrefix+"keep", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	var prefixes []string
	for i := range 2 {
		t.Run(fmt.Sprint("user", i), func(t *testing.T) {
			client, prefix := testenv.Redis(t)
			if strings.ContainsAny(prefix, "{}*?[]") {
				t.Errorf("prefix %q holds hash tag or glob characters", prefix)
			}
			for j := range 100 {
				if err := client.Set(ctx, fmt.Sprintf("%s%d", prefix, j), j, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if got := countKeys(t, outer, outerPrefix); got != 1 {
				t.Errorf("keys under the other test's prefix = %d, want 1", got)
			}
			prefixes = append(prefixes, prefix)
		})
	}

	if len(prefixes) != 2 || prefixes[0] == prefixes[1] || prefixes[0] == outerPrefix {
		t.Fatalf("prefixes %q and outer %q are not distinct", prefixes, outerPrefix)
	}
	for _, p := range prefixes {
		if got := countKeys(t, outer, p); got != 0 {
			t.Errorf("keys left under %q after its test = %d, want 0", p, got)
		}
	}
	if got := countKeys(t, outer, outerPrefix); got != 1 {
		t.Errorf("keys under the still-running test's prefix = %d, want 1", got)
	}
}

func TestClusterAddrsReused(t *testing.T) {
	first := testenv.ClusterAddrs(t)
	second := testenv.ClusterAddrs(t)
	if strings.Join(first, ",") != strings.Join(second, ",") {
		t.Errorf("second ClusterAddrs = %v, want the first %v", second, first)
	}
}

func TestRedisClusterTopology(t *testing.T) {
	client, _ := testenv.RedisCluster(t)
	shards, err := client.ClusterShards(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	masters := map[string]bool{}
	var covered int64
	for _, s := range shards {
		for _, n := range s.Nodes {
			if n.Role == "master" {
				masters[n.ID] = true
			}
		}
		for _, r := range s.Slots {
			covered += r.End - r.Start + 1
		}
	}
	if len(masters) != 3 {
		t.Errorf("masters = %d, want 3", len(masters))
	}
	if covered != 16384 {
		t.Errorf("slots covered = %d, want 16384", covered)
	}
}

func TestRedisClusterKeysAcrossSlots(t *testing.T) {
	ctx := context.Background()
	client, prefix := testenv.RedisCluster(t)

	masters := map[string]bool{}
	for i := range 100 {
		key := fmt.Sprintf("%s%d", prefix, i)
		if err := client.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		master, err := client.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		masters[master.Options().Addr] = true
	}
	for i := range 100 {
		key := fmt.Sprintf("%s%d", prefix, i)
		got, err := client.Get(ctx, key).Int()
		if err != nil || got != i {
			t.Errorf("GET %s = %d, %v; want %d", key, got, err, i)
		}
	}
	if len(masters) != 3 {
		t.Errorf("100 keys landed on %d masters, want 3", len(masters))
	}

	// A hash tag after the prefix must keep keys together for multi-key commands.
	a, b := prefix+"{acct}:a", prefix+"{acct}:b"
	if err := client.MSet(ctx, a, "1", b, "2").Err(); err != nil {
		t.Errorf("MSET with a shared hash tag: %v", err)
	}
}

func TestRedisClusterCleansUp(t *testing.T) {
	ctx := context.Background()
	outer, outerPrefix := testenv.RedisCluster(t)
	if err := outer.Set(ctx, outerPrefix+"keep", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	var inner string
	t.Run("user", func(t *testing.T) {
		client, prefix := testenv.RedisCluster(t)
		if prefix == outerPrefix {
			t.Fatalf("prefix %q reused", prefix)
		}
		for j := range 100 {
			if err := client.Set(ctx, fmt.Sprintf("%s%d", prefix, j), j, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		inner = prefix
	})

	if got := countClusterKeys(t, outer, inner); got != 0 {
		t.Errorf("keys left under %q after its test = %d, want 0", inner, got)
	}
	if got := countClusterKeys(t, outer, outerPrefix); got != 1 {
		t.Errorf("keys under the still-running test's prefix = %d, want 1", got)
	}
}

func TestPostgresDatabases(t *testing.T) {
	ctx := context.Background()
	var names []string
	t.Run("user", func(t *testing.T) {
		for range 2 {
			dbURL := testenv.Postgres(t)
			conn, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				t.Fatalf("connecting to %s: %v", dbURL, err)
			}
			// Left open on purpose: the drop must not wait for it.
			t.Cleanup(func() { conn.Close(ctx) })

			var name string
			var tables int
			err = conn.QueryRow(ctx, `SELECT current_database(),
				(SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema'))`).Scan(&name, &tables)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(name, "xcloak_test_") {
				t.Errorf("database name = %q, want prefix xcloak_test_", name)
			}
			if tables != 0 {
				t.Errorf("user tables in a fresh database = %d, want 0", tables)
			}
			names = append(names, name)
		}
	})

	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("databases %q are not distinct", names)
	}
	admin, err := pgx.Connect(ctx, testenv.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, name := range names {
		var exists bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Errorf("database %s still exists after its test", name)
		}
	}
}

// TestUnreachableServersFail checks that a missing server fails the test
// rather than skipping it, names where it looked, and keeps passwords out.
func TestUnreachableServersFail(t *testing.T) {
	tests := []struct {
		name, env, url string
		use            func(testing.TB)
	}{
		{"redis", "XCLOAK_TEST_REDIS_URL", "redis://:s3cret@127.0.0.1:1/0",
			func(tb testing.TB) { testenv.Redis(tb) }},
		{"postgres url", "XCLOAK_TEST_DATABASE_URL", "postgres://postgres:s3cret@127.0.0.1:1/postgres?sslmode=disable",
			func(tb testing.TB) { testenv.Postgres(tb) }},
		{"postgres keyword/value", "XCLOAK_TEST_DATABASE_URL", "host=127.0.0.1 port=1 user=postgres password=s3cret sslmode=disable",
			func(tb testing.TB) { testenv.Postgres(tb) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tt.env, tt.url)
			rec := &fatalRecorder{TB: t}
			rec.run(tt.use)
			switch {
			case rec.skipped:
				t.Fatalf("helper skipped the test; want it to fail")
			case rec.msg == "":
				t.Fatalf("helper returned; want it to fail")
			}
			if !strings.Contains(rec.msg, "127.0.0.1") || !strings.Contains(rec.msg, tt.env) {
				t.Errorf("failure %q does not name the server and %s", rec.msg, tt.env)
			}
			if strings.Contains(rec.msg, "s3cret") {
				t.Errorf("failure %q reveals the password", rec.msg)
			}
		})
	}
}

// fatalRecorder stands in for a test so a helper's failure can be observed
// instead of failing the test that checks it.
type fatalRecorder struct {
	testing.TB
	mu      sync.Mutex
	msg     string
	skipped bool
}

// run calls use on its own goroutine, which Fatal and Skip end.
func (r *fatalRecorder) run(use func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		use(r)
	}()
	<-done
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.stop(fmt.Sprintf(format, args...), false)
}

func (r *fatalRecorder) Fatal(args ...any) { r.stop(fmt.Sprint(args...), false) }

func (r *fatalRecorder) FailNow() { r.stop("FailNow", false) }

func (r *fatalRecorder) Skipf(format string, args ...any) {
	r.stop(fmt.Sprintf(format, args...), true)
}

func (r *fatalRecorder) Skip(args ...any) { r.stop(fmt.Sprint(args...), true) }

func (r *fatalRecorder) SkipNow() { r.stop("SkipNow", true) }

func (r *fatalRecorder) stop(msg string, skipped bool) {
	r.mu.Lock()
	r.msg, r.skipped = msg, skipped
	r.mu.Unlock()
	runtime.Goexit()
}

// countKeys counts the keys on a standalone server that start with prefix.
func countKeys(t *testing.T, client *redis.Client, prefix string) int {
	t.Helper()
	keys, err := scanAll(context.Background(), client, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// countClusterKeys counts the keys on every master that start with prefix.
func countClusterKeys(t *testing.T, client *redis.ClusterClient, prefix string) int {
	t.Helper()
	var mu sync.Mutex
	total := 0
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, master *redis.Client) error {
		keys, err := scanAll(ctx, master, prefix)
		mu.Lock()
		total += len(keys)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

func scanAll(ctx context.Context, client *redis.Client, prefix string) ([]string, error) {
	var all []string
	iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		all = append(all, iter.Val())
	}
	return all, iter.Err()
}

func TestPrivateServersRestart(t *testing.T) {
	pg := testenv.PrivatePostgres(t)
	rs := testenv.PrivateRedis(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rdb.Close()
	rdb.Set(ctx, "k", "v", 0)

	pg.Stop()
	rs.Stop()
	if _, err := pgx.Connect(ctx, pg.URL()); err == nil {
		t.Fatal("Postgres answers after Stop")
	}
	if rdb.Ping(ctx).Err() == nil {
		t.Fatal("Redis answers after Stop")
	}
	pg.Start()
	rs.Start()
	conn, err = pgx.Connect(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT n FROM kept").Scan(&n); err != nil || n != 1 {
		t.Fatalf("Postgres lost its data over a restart: %v", err)
	}
	if rdb.Exists(ctx, "k").Val() != 0 {
		t.Fatal("private Redis kept a key over a restart; it must start empty like a crash without persistence")
	}
}
