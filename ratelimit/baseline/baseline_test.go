package baseline_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNotReachableFromServer keeps the racy limiter out of the server: no
// package the xcloak binary is built from may import this one.
func TestNotReachableFromServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/xcloak/xcloak/cmd/xcloak").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed no packages")
	}
	for _, dep := range deps {
		if dep == "github.com/xcloak/xcloak/ratelimit/baseline" {
			t.Fatal("cmd/xcloak depends on ratelimit/baseline; the baseline is for tests, benchmarks and the simulator only")
		}
	}
}
