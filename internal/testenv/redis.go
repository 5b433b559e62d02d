package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultRedisURL is the standalone Redis a development machine runs.
const defaultRedisURL = "redis://127.0.0.1:6379/0"

// cleanupTimeout bounds every cleanup so a hung server cannot hang the test run.
const cleanupTimeout = 30 * time.Second

// RedisURL returns the URL of the standalone Redis tests use:
// XCLOAK_TEST_REDIS_URL, else XCLOAK_REDIS_URL, else redis://127.0.0.1:6379/0.
func RedisURL() string {
	u, _ := redisURL()
	return u
}

// redisURL also says where the URL came from, so failure messages can tell
// the reader which variable to fix.
func redisURL() (raw, source string) {
	return fromEnv(defaultRedisURL, "XCLOAK_TEST_REDIS_URL", "XCLOAK_REDIS_URL")
}

// fromEnv returns the first non-empty variable of names, else def.
func fromEnv(def string, names ...string) (value, source string) {
	for _, name := range names {
		if v := os.Getenv(name); v != "" {
			return v, name
		}
	}
	return def, "default"
}

// Redis returns a client to the standalone Redis at [RedisURL] and a key
// prefix of the form "xcloak-test:<12 hex digits>:" unique to this test.
// The prefix holds no braces, so callers may append their own hash tags.
//
// When the test ends, every key starting with the prefix is deleted and the
// client is closed. An unreachable Redis fails the test.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	raw, source := redisURL()
	where := fmt.Sprintf("%s (from %s)", redactURL(raw), source)

	if _, err := url.Parse(raw); err != nil {
		t.Fatalf("testenv: Redis URL %s is not a valid URL: %v", where, urlErrorCause(err))
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("testenv: Redis URL %s is not usable: %v", where, err)
	}
	client := redis.NewClient(opts)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		t.Fatalf("testenv: cannot reach Redis at %s: %v; start redis-server or set XCLOAK_TEST_REDIS_URL", where, err)
	}

	prefix := newPrefix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := deletePrefixed(ctx, client, prefix, true); err != nil {
			t.Errorf("testenv: deleting Redis keys %s*: %v", prefix, err)
		}
		_ = client.Close()
	})
	return client, prefix
}

// newPrefix returns a fresh key prefix. Hex keeps it free of glob characters
// (so it can be used verbatim in SCAN MATCH) and of braces (so it never
// changes which cluster slot a key hashes to).
func newPrefix() string {
	return "xcloak-test:" + randomHex(6) + ":"
}

// randomHex returns n random bytes as lowercase hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b)
}

// deletePrefixed removes every key on one node that starts with prefix.
// Cluster nodes refuse multi-key commands across slots, so there each key is
// unlinked on its own (batched in a pipeline); a standalone server takes a
// whole batch in one UNLINK.
func deletePrefixed(ctx context.Context, node *redis.Client, prefix string, multiKey bool) error {
	var cursor uint64
	for {
		keys, next, err := node.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		if len(keys) > 0 {
			if multiKey {
				err = node.Unlink(ctx, keys...).Err()
			} else {
				_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
					for _, k := range keys {
						p.Unlink(ctx, k)
					}
					return nil
				})
			}
			if err != nil {
				return fmt.Errorf("unlink: %w", err)
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// redactURL hides any password in raw so it can appear in test output.
// raw may also be a Postgres keyword/value list ("host=... password=...").
func redactURL(raw string) string {
	if !strings.Contains(raw, "://") {
		return keywordPassword.ReplaceAllString(raw, "${1}xxxxx")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable URL>"
	}
	return u.Redacted()
}

// keywordPassword matches the value of a password setting in a keyword/value
// connection string, quoted or not.
var keywordPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// urlErrorCause drops the quoted URL that *url.Error carries, since that URL
// may include a password.
func urlErrorCause(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
