package main

import (
	"os/exec"
	"testing"
)

// TestGoModTidy: go.mod and go.sum say exactly what the code imports, so a
// dependency added or dropped without `go mod tidy` fails here, not in a
// later build.
func TestGoModTidy(t *testing.T) {
	cmd := exec.Command("go", "mod", "tidy", "-diff")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy -diff: %v; run go mod tidy:\n%s", err, out)
	}
}
