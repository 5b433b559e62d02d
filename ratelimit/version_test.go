package ratelimit_test

import (
	"context"
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// TestCheckVersion: the Redis the tests run on is recent enough, alone
// and as a cluster.
func TestCheckVersion(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	if err := ratelimit.CheckVersion(context.Background(), rdb); err != nil {
		t.Fatal(err)
	}
	cluster, _ := testenv.RedisCluster(t)
	if err := ratelimit.CheckVersion(context.Background(), cluster); err != nil {
		t.Fatal(err)
	}
}
