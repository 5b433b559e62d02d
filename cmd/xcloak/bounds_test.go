package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestReadmeStatesPasswordRule: what README says `user add` refuses is the
// rule auth applies.
func TestReadmeStatesPasswordRule(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	if want := fmt.Sprintf("refuses one shorter than %d characters", auth.MinPasswordRunes); !strings.Contains(readme, want) {
		t.Errorf("README does not say %q", want)
	}
}
