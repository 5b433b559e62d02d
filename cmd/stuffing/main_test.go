package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// runStuffing runs the command line args (without the program name) and
// returns what it printed.
func runStuffing(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), append([]string{"stuffing"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}
