package main

import (
	"encoding/json"
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
)

func TestMemory(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	stdout, stderr, err := runStuffing(t, "memory", "--json", "--redis", testenv.RedisURL(), "--key-prefix", prefix,
		"--ips", "300", "--attempts", "1,12", "--limit", "10/10m", "--samples", "10")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rows []memoryRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if len(rows) != 2 {
		t.Fatalf("got %d rows, want 2, one per attempt count", len(rows))
	}
	// used_memory is the whole server's, which other tests share: only the
	// per-key figures are checked.
	for _, r := range rows {
		if r.IPs != 300 || r.MemoryUsageCount != 10 || r.MemoryUsageMean <= 0 {
			t.Errorf("row %+v: want 300 addresses and 10 positive MEMORY USAGE samples", r)
		}
	}
	// Attempts past the limit write nothing, so 12 attempts at limit 10
	// cost what 10 do, which is more than 1 (a log of one entry and one of
	// two can share the allocator's size class).
	if rows[1].MemoryUsageMean <= rows[0].MemoryUsageMean {
		t.Errorf("MEMORY USAGE %v at 3 attempts, %v at 1; want more for the fuller log", rows[1].MemoryUsageMean, rows[0].MemoryUsageMean)
	}
	assertNoKeys(t, rdb, prefix)
}
