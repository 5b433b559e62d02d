package client_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// The examples' XCloak: the real service on the test Redis and Postgres,
// serving over loopback for the whole test binary, with one application's
// key. An Example function has no *testing.T to build it with, so TestMain
// builds it.
var (
	xcloakURL string
	apiKey    string
)

// TestMain runs the tests and examples inside testing.Benchmark, whose *B
// is the one testing.TB the standard library hands out outside a test:
// the XCloak is built with it and torn down by its cleanups once m.Run
// returns. Benchmark calls its function again with a larger N until a
// second has passed; once makes those calls return at once.
func TestMain(m *testing.M) {
	code := 1
	var once sync.Once
	testing.Benchmark(func(b *testing.B) {
		once.Do(func() {
			env := xcloaktest.New(b, xcloaktest.Options{})
			xcloakURL = env.Start(b)
			apiKey = env.AddAPIKey(b, "shop")
			code = m.Run()
		})
	})
	if code != 0 && xcloakURL == "" {
		fmt.Fprintln(os.Stderr, "client: the examples' XCloak did not start")
	}
	os.Exit(code)
}
