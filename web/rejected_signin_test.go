package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xcloak/xcloak/internal/race"
	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// rejectedSignIn is the request of `stuffing compare`'s rejections
// (cmd/stuffing/wrk/login.lua): a JSON sign-in to one account past its
// limit.
const rejectedSignIn = `{"email":"wrk-victim@example.com","password":"not-the-password"}`

// rejectingServe returns a server with the default attack detection whose
// wrk-victim@example.com is past its limit, and a function that sends it
// rejectedSignIn once more through the whole handler chain, failing tb
// unless it is answered 429. The request, its body and the writer are
// made once and reused, so that what each call allocates is the
// handlers' alone.
func rejectingServe(tb testing.TB) func() {
	tb.Helper()
	env := xcloaktest.New(tb, xcloaktest.Options{Attack: xcloaktest.DetectAttacks})
	body := &rereadBody{}
	r := httptest.NewRequest(http.MethodPost, "/api/v1/login", body)
	r.Header.Set("Content-Type", "application/json")
	r.RemoteAddr = "127.0.0.1:40000"
	w := &discardWriter{h: http.Header{}}
	send := func() {
		body.Reset(rejectedSignIn)
		r.ContentLength = int64(len(rejectedSignIn))
		clear(w.h)
		w.status = 0
		env.Handler.ServeHTTP(w, r)
	}
	for range 100 {
		send()
		if w.status == http.StatusTooManyRequests {
			return func() {
				send()
				if w.status != http.StatusTooManyRequests {
					tb.Fatalf("sign-in answered %d, want 429", w.status)
				}
			}
		}
		if w.status != http.StatusUnauthorized {
			tb.Fatalf("sign-in answered %d, want 401s then 429", w.status)
		}
	}
	tb.Fatal("100 wrong passwords and still no 429")
	return nil
}

// BenchmarkRejectedSignIn is a rejected JSON sign-in through the whole
// handler chain, in process (no socket): the middleware, the body, the
// decision from the replica's memory of full rules, its event, metric and
// attack detection, and the 429. Beside the time of one rejection it
// reports the process' CPU per rejection (cpu-ns/op), which counts what
// runs beside the handlers, on the other core: the security events'
// batches and the garbage collector. Under a flood both cores are busy, so
// that is what a rejection costs a server.
func BenchmarkRejectedSignIn(b *testing.B) {
	serve := rejectingServe(b)
	b.ReportAllocs()
	before := processCPU(b)
	for b.Loop() {
		serve()
	}
	b.ReportMetric(float64(processCPU(b)-before)/float64(b.N), "cpu-ns/op")
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU(tb testing.TB) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// rejectedSignInAllocs is what a rejected JSON sign-in allocates through
// the whole handler chain: the request's ID, its record and context
// (logRequests), the request's copy with that context; the body's two
// strings; the rules and the /24's name; the decision's results and the
// LimitedError. Not the password's spraying key: a rejection the memory
// knows from the other rules is answered before it is made.
const rejectedSignInAllocs = 10

// TestRejectedSignInAllocations: a rejected JSON sign-in, the request a
// flood of credential stuffing sends, allocates no more than
// rejectedSignInAllocs through the whole handler chain, so that what was
// cut cannot creep back unseen.
func TestRejectedSignInAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts under -race count what sync.Pool drops")
	}
	serve := rejectingServe(t)
	// The fewest of a few counts: the service's background work (its
	// events written in batches) allocates now and then, and counts in
	// whichever run it falls.
	least := 1e9
	for range 5 {
		least = min(least, testing.AllocsPerRun(200, serve))
	}
	if least > rejectedSignInAllocs {
		t.Errorf("a rejected sign-in allocates %v times, want at most %d", least, rejectedSignInAllocs)
	}
}

// rereadBody is a request body read again after Reset, so that the
// benchmark allocates none.
type rereadBody struct{ strings.Reader }

func (*rereadBody) Close() error { return nil }

// discardWriter keeps the headers and the status and throws the body
// away, so that counting allocations counts only the handlers'.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
