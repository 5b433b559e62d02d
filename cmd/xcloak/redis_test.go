package main

import (
	"flag"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// TestRedisAddressListsRefuseEmptyAndRepeatedEntries: an empty address
// (a trailing or doubled comma, or no host at all) is refused rather than
// read as go-redis reads an empty host, localhost:6379, which would add a
// Redis nobody named as a Cluster seed; an address listed twice is refused
// as XCLOAK_WEBHOOK_URL refuses a URL listed twice. Neither error quotes
// the URL.
func TestRedisAddressListsRefuseEmptyAndRepeatedEntries(t *testing.T) {
	for _, bad := range []string{
		"redis://:S3cr3tPw@10.0.0.1:6379,",
		"redis://:S3cr3tPw@10.0.0.1:6379,,10.0.0.2:6379",
		"redis://:S3cr3tPw@10.0.0.1:6379, ,10.0.0.2:6379",
		"redis://:S3cr3tPw@,10.0.0.1:6379",
		"redis://:S3cr3tPw@/0",
		"redis://",
		"redis://:S3cr3tPw@10.0.0.1:6379,10.0.0.1:6379",
		"redis://:S3cr3tPw@10.0.0.1:6379, 10.0.0.1:6379/0?master_name=main",
	} {
		_, err := redisOptions(bad, false)
		if err == nil {
			t.Errorf("%s: accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "S3cr3tPw") || strings.Contains(err.Error(), "10.0.0") {
			t.Errorf("%s: the error quotes the URL: %v", bad, err)
		}
	}
	for _, good := range []string{"redis://10.0.0.1:6379,10.0.0.2:6379", "unix:///run/redis.sock", "redis://:6379"} {
		if _, err := redisOptions(good, false); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
}

// TestRedisOptionsKeepTheURLs: every option go-redis reads from a URL
// (timeouts, pool, retries, TLS, client name, ...) reaches the client
// XCloak builds, and only what XCloak must set is its own: the URL's
// options win over its defaults.
func TestRedisOptionsKeepTheURLs(t *testing.T) {
	const query = "client_name=xc&protocol=2&max_retries=5&min_retry_backoff=10ms&max_retry_backoff=2s" +
		"&dial_timeout=3s&read_timeout=4s&write_timeout=5s&pool_fifo=true&pool_size=7&pool_timeout=6s" +
		"&min_idle_conns=1&max_idle_conns=2&max_active_conns=9&max_concurrent_dials=3" +
		"&pipeline_pool_size=4&pipeline_read_buffer_size=65536&pipeline_write_buffer_size=32768" +
		"&conn_max_idle_time=7s&conn_max_lifetime=8s&conn_max_lifetime_jitter=1s&skip_verify=true"
	const raw = "rediss://u:p@cache.example.com:6380/3?" + query
	want, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := redisOptions(raw, false)
	if err != nil {
		t.Fatal(err)
	}
	// Field by field, by name, so that an option a newer go-redis reads
	// from URLs fails here until it is carried too.
	w, g := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
	for i := range w.NumField() {
		f := w.Type().Field(i)
		if f.Name == "Network" || f.Name == "Addr" || !f.IsExported() || w.Field(i).IsZero() {
			continue
		}
		gf := g.FieldByName(f.Name)
		if !gf.IsValid() {
			t.Errorf("redis.ParseURL sets %s, which redis.UniversalOptions has not", f.Name)
			continue
		}
		if !reflect.DeepEqual(gf.Interface(), w.Field(i).Interface()) {
			t.Errorf("%s = %v, want the URL's %v", f.Name, gf.Interface(), w.Field(i).Interface())
		}
	}
	if strings.Join(got.Addrs, ",") != want.Addr {
		t.Errorf("Addrs = %v, want [%s]", got.Addrs, want.Addr)
	}

	// The client keeps them, and XCloak's own settings.
	rdb, _, err := newRedisClient(raw, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	o := rdb.(*redis.Client).Options()
	if o.PoolTimeout != 6*time.Second || o.ConnMaxIdleTime != 7*time.Second || o.ClientName != "xc" || o.MaxRetries != 5 ||
		o.PoolSize != 7 || o.MaxActiveConns != 9 || o.TLSConfig == nil || !o.TLSConfig.InsecureSkipVerify {
		t.Errorf("client options lost the URL's: %+v", o)
	}
	if o.DialerRetries != 1 || !o.ContextTimeoutEnabled {
		t.Errorf("client options: DialerRetries %d, ContextTimeoutEnabled %v; want XCloak's 1 and true", o.DialerRetries, o.ContextTimeoutEnabled)
	}
}

// TestRedisURLRefusesPoolNonsense: go-redis takes a URL's pool_size as it
// is, and a negative one panicked when the client was made (a channel of
// negative size), a huge one, or a huge pipeline_pool_size, ran the
// process out of memory; a dial_timeout or pool_timeout of zero or less, which go-redis reads as
// -1ns, failed every dial, or every wait for a busy pool, at once. Each
// is refused at start, naming the option, without quoting the URL.
func TestRedisURLRefusesPoolNonsense(t *testing.T) {
	for _, tc := range []struct{ query, option string }{
		{"pool_size=-5", "pool_size"},
		{"pool_size=100000000", "pool_size"},
		{"pipeline_pool_size=100000000", "pipeline_pool_size"},
		{"dial_timeout=-5s", "dial_timeout"},
		{"dial_timeout=0", "dial_timeout"},
		{"pool_timeout=-1s", "pool_timeout"},
	} {
		raw := "redis://:S3cr3tPw@127.0.0.1:6379/0?" + tc.query
		_, err := redisOptions(raw, false)
		if err == nil {
			t.Errorf("%s: accepted", tc.query)
			continue
		}
		if !strings.Contains(err.Error(), tc.option) || strings.Contains(err.Error(), "S3cr3tPw") {
			t.Errorf("%s: error %q, want one naming %s and not quoting the URL", tc.query, err, tc.option)
		}
	}
	for _, good := range []string{"pool_size=1", "pool_size=10000", "dial_timeout=1s", "pool_timeout=3s", "read_timeout=-1", "pipeline_pool_size=-1"} {
		if _, err := redisOptions("redis://127.0.0.1:6379/0?"+good, false); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
}

// TestRedisURLRefusesHugePipelineBuffers: go-redis gives each connection
// of its pipeline pool a read and a write buffer of a URL's
// pipeline_read_buffer_size and pipeline_write_buffer_size, as they are.
// A huge one passed the start, whose checks use no pipeline, and the
// first pipeline, moments after serve began listening, then ran the
// process out of memory, a fatal error no recover catches. Each is refused at start, naming the option,
// without quoting the URL.
func TestRedisURLRefusesHugePipelineBuffers(t *testing.T) {
	for _, option := range []string{"pipeline_read_buffer_size", "pipeline_write_buffer_size"} {
		for _, size := range []string{"99999999999", strconv.Itoa(maxRedisBuffer + 1)} {
			raw := "redis://:S3cr3tPw@127.0.0.1:6379/0?" + option + "=" + size
			_, err := redisOptions(raw, false)
			if err == nil {
				t.Errorf("%s=%s: accepted", option, size)
				continue
			}
			if !strings.Contains(err.Error(), option) || strings.Contains(err.Error(), "S3cr3tPw") {
				t.Errorf("%s=%s: error %q, want one naming %s and not quoting the URL", option, size, err, option)
			}
		}
		// go-redis' own default, the largest, and none (its default).
		for _, size := range []string{"131072", strconv.Itoa(maxRedisBuffer), "0", "-1"} {
			if _, err := redisOptions("redis://127.0.0.1:6379/0?"+option+"="+size, false); err != nil {
				t.Errorf("%s=%s: %v", option, size, err)
			}
		}
	}
}

// TestRedisClusterWithSentinelIsRefused: XCLOAK_REDIS_CLUSTER=true and a
// URL naming a Sentinel master_name ask for two kinds of Redis; the
// client was silently a Sentinel one. Both settings are named, at start,
// as a Cluster's database other than 0 is.
func TestRedisClusterWithSentinelIsRefused(t *testing.T) {
	for _, url := range []string{
		"redis://10.0.0.1:26379,10.0.0.2:26379/0?master_name=main",
		"redis://10.0.0.1:6379/1",
	} {
		vars := map[string]string{"XCLOAK_REDIS_URL": url, "XCLOAK_REDIS_CLUSTER": "true"}
		_, err := loadConfig(flag.NewFlagSet("test", flag.ContinueOnError), nil, env(vars), io.Discard, io.Discard, forServe)
		if err == nil || !strings.Contains(err.Error(), "XCLOAK_REDIS_CLUSTER") {
			t.Errorf("%s with XCLOAK_REDIS_CLUSTER=true: %v, want an error naming it", url, err)
		}
	}
}
