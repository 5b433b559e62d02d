package main

import (
	"strings"
	"testing"
	"time"
)

func TestRedisOptions(t *testing.T) {
	for _, tc := range []struct {
		url      string
		cluster  bool
		addrs    string
		master   string
		clusterM bool
		db       int
		password string
		timeout  time.Duration
	}{
		{url: "redis://127.0.0.1:6379/0", addrs: "127.0.0.1:6379"},
		{url: "redis://:s3cret@127.0.0.1:6379/2", addrs: "127.0.0.1:6379", db: 2, password: "s3cret"},
		{url: "redis://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002", addrs: "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"},
		{url: "redis://127.0.0.1:7000", cluster: true, addrs: "127.0.0.1:7000", clusterM: true},
		{url: "redis://u:p@10.0.0.1:26379,10.0.0.2:26379/1?master_name=main&dial_timeout=3s", addrs: "10.0.0.1:26379,10.0.0.2:26379", master: "main", db: 1, password: "p", timeout: 3 * time.Second},
	} {
		opts, err := redisOptions(tc.url, tc.cluster)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if got := strings.Join(opts.Addrs, ","); got != tc.addrs || opts.MasterName != tc.master || opts.IsClusterMode != tc.clusterM ||
			opts.DB != tc.db || opts.Password != tc.password || opts.DialTimeout != tc.timeout {
			t.Errorf("%s: got %+v", tc.url, opts)
		}
	}
	for _, bad := range []string{
		"127.0.0.1:6379",
		"http://127.0.0.1:6379",
		"redis://127.0.0.1:7000,127.0.0.1:7001/3",
		"redis://127.0.0.1:6379/0?nonsense=1",
		"redis://127.0.0.1:notaport",
	} {
		if _, err := redisOptions(bad, false); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	if _, err := redisOptions("redis://127.0.0.1:7000/1", true); err == nil {
		t.Error("cluster with database 1 accepted")
	}
}
