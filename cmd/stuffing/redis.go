package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// defaultRedisURL is the standalone Redis of a development machine.
const defaultRedisURL = "redis://127.0.0.1:6379/0"

// redisTarget is where a command's Redis lives: one server or a cluster.
type redisTarget struct {
	url     string
	cluster []string
	// pool is the number of connections per node; 0 keeps go-redis's
	// default of ten per CPU.
	pool  int
	allow bool
}

// connect checks the target's hosts, connects and pings. describe says
// what was reached, without any password.
func (t redisTarget) connect(ctx context.Context) (rdb redis.UniversalClient, describe string, err error) {
	dial := guardedDialer{allow: t.allow}
	if len(t.cluster) > 0 {
		for _, a := range t.cluster {
			if err := checkHostPort(ctx, a, t.allow); err != nil {
				return nil, "", fmt.Errorf("--cluster %s: %w", a, err)
			}
		}
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: t.cluster, PoolSize: t.pool, Dialer: dial.DialContext,
		})
		if err := c.Ping(ctx).Err(); err != nil {
			_ = c.Close()
			return nil, "", fmt.Errorf("reaching the Redis Cluster at %s: %w", strings.Join(t.cluster, ","), err)
		}
		var masters atomic.Int64
		if err := c.ForEachMaster(ctx, func(context.Context, *redis.Client) error {
			masters.Add(1)
			return nil
		}); err != nil {
			_ = c.Close()
			return nil, "", fmt.Errorf("listing the cluster's masters: %w", err)
		}
		return c, fmt.Sprintf("Redis Cluster at %s (%d masters)", strings.Join(t.cluster, ","), masters.Load()), nil
	}

	opts, err := redis.ParseURL(t.url)
	if err != nil {
		return nil, "", fmt.Errorf("--redis: %w", err)
	}
	if err := checkHostPort(ctx, opts.Addr, t.allow); err != nil {
		return nil, "", fmt.Errorf("--redis %s: %w", opts.Addr, err)
	}
	opts.Dialer = dial.DialContext
	if t.pool > 0 {
		opts.PoolSize = t.pool
	}
	c := redis.NewClient(opts)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, "", fmt.Errorf("reaching Redis at %s: %w", opts.Addr, err)
	}
	return c, fmt.Sprintf("Redis at %s db %d", opts.Addr, opts.DB), nil
}

// newRunPrefix returns base + 12 random hex digits + ":". Hex keeps the
// prefix free of glob characters, for SCAN MATCH, and of braces, which
// would move keys between cluster slots.
func newRunPrefix(base string) (string, error) {
	if strings.ContainsAny(base, "{}*?[]\\") {
		return "", fmt.Errorf("key prefix %q must not contain braces or glob characters", base)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return base + hex.EncodeToString(b) + ":", nil
}

// deletePrefixed removes every key starting with prefix, on every master
// of a cluster, one key per command so no command spans slots. It returns
// how many keys it removed.
func deletePrefixed(ctx context.Context, rdb redis.UniversalClient, prefix string) (int, error) {
	var removed atomic.Int64
	sweep := func(ctx context.Context, node *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, prefix+"*", 1000).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
					for _, k := range keys {
						p.Unlink(ctx, k)
					}
					return nil
				}); err != nil {
					return err
				}
				removed.Add(int64(len(keys)))
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, sweep)
	case *redis.Client:
		err = sweep(ctx, c)
	default:
		err = errors.New("unknown kind of Redis client")
	}
	return int(removed.Load()), err
}
