package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/ratelimit"
)

// reply is an error reply as go-redis returns it.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestIsOutage(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}
	wrap := func(err error) error { return fmt.Errorf("ratelimit: rule login_ip: %w", err) }
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"no error", live, nil, false},
		{"request cancelled (client hung up)", cancelled, wrap(context.Canceled), false},
		{"request cancelled, Redis down too", cancelled, wrap(dial), false},
		{"derived context cancelled", live, wrap(context.Canceled), false},
		{"own timeout passed", live, wrap(context.DeadlineExceeded), false},
		{"dial refused", live, wrap(dial), true},
		{"out of file descriptors", live, wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "socket", Err: syscall.EMFILE}}), false},
		{"dial out of time", live, fmt.Errorf("%w: %w", context.DeadlineExceeded, dial), true},
		{"connection reset", live, wrap(reset), true},
		{"read timeout", live, wrap(&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}), false},
		{"EOF from Redis", live, wrap(io.EOF), true},
		{"short reply", live, wrap(io.ErrUnexpectedEOF), true},
		{"pool timeout", live, wrap(redis.ErrPoolTimeout), false},
		{"LOADING", live, wrap(reply("LOADING Redis is loading the dataset in memory")), true},
		{"CLUSTERDOWN", live, wrap(reply("CLUSTERDOWN The cluster is down")), true},
		{"MASTERDOWN", live, wrap(reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.")), true},
		{"TRYAGAIN (a slot migrating)", live, wrap(reply("TRYAGAIN Multiple keys request during rehashing of slot")), false},
		{"READONLY", live, wrap(reply("READONLY You can't write against a read only replica.")), true},
		{"BUSY", live, wrap(reply("BUSY Redis is busy running a script.")), true},
		{"max clients", live, wrap(reply("ERR max number of clients reached")), true},
		{"OOM", live, wrap(reply("OOM command not allowed when used memory > 'maxmemory'.")), true},
		{"MISCONF", live, wrap(reply("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.")), true},
		{"OOM in a script, as Redis 6.2 gives it", live, wrap(reply("ERR Error running script (call to f_0123): @user_script: 274: -OOM command not allowed when used memory > 'maxmemory'.")), true},
		{"READONLY in a script, as Redis 6.2 gives it", live, wrap(reply("ERR Error running script (call to f_0123): @user_script: 239: -READONLY You can't write against a read only replica.")), true},
		{"a script's own error", live, wrap(reply("ERR Error running script (call to f_0123): @user_script: 12: ratelimit: ARGV[1] is not packed rules for the keys given")), false},
		{"script bug", live, wrap(reply("ERR user_script:12: Script attempted to access nonexistent global variable 'x'")), false},
		{"wrong type", live, wrap(reply("WRONGTYPE Operation against a key holding the wrong kind of value")), false},
		{"no script", live, wrap(redis.ErrNoScript), false},
		{"unexpected reply", live, errors.New("ratelimit: rule login_ip: unexpected reply [1 2]"), false},
		{"client closed at shutdown", live, redis.ErrClosed, false},
		{"no sentinel answers", live, errors.New("redis: all sentinels specified in configuration are unreachable"), true},
	} {
		if got := ratelimit.IsOutage(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: IsOutage(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestIsSlow: what a stuck Redis and a queue for connections have in
// common, and nothing else.
func TestIsSlow(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}
	wrap := func(err error) error { return fmt.Errorf("ratelimit: rule login_ip: %w", err) }
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"no error", live, nil, false},
		{"own bound passed", live, wrap(context.DeadlineExceeded), true},
		{"pool timeout", live, wrap(redis.ErrPoolTimeout), true},
		{"read timeout", live, wrap(&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}), true},
		{"request's own deadline", cancelled, wrap(context.DeadlineExceeded), false},
		{"dial out of time", live, fmt.Errorf("%w: %w", context.DeadlineExceeded, dial), false},
		{"out of file descriptors", live, wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "socket", Err: syscall.EMFILE}}), true},
		{"no local port", live, wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.EADDRNOTAVAIL}}), true},
		{"EOF", live, wrap(io.EOF), false},
		{"script bug", live, wrap(reply("ERR user_script:1: oops")), false},
		{"TRYAGAIN (a slot migrating)", live, wrap(reply("TRYAGAIN Multiple keys request during rehashing of slot")), true},
		{"TRYAGAIN, request gone", cancelled, wrap(reply("TRYAGAIN Multiple keys request during rehashing of slot")), false},
	} {
		if got := ratelimit.IsSlow(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: IsSlow(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestFailoverIgnoresCancelledRequests: decisions, failures and clears
// made for a request whose client has gone leave the shared limits on.
func TestFailoverIgnoresCancelledRequests(t *testing.T) {
	for _, p := range []ratelimit.FailurePolicy{ratelimit.FailLocal, ratelimit.FailClosed, ratelimit.FailOpen} {
		t.Run(string(p), func(t *testing.T) {
			rdb, _ := testenv.Redis(t)
			f := newFailover(t, rdb, p)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			rule := ratelimit.Rule{Name: "login_account", ID: "gone-" + string(p), Limit: ratelimit.PerMinute(5), Lockable: true}
			if _, err := f.AllowAll(ctx, rule); err == nil {
				t.Error("AllowAll with a cancelled context succeeded")
			}
			if _, err := f.Fail(ctx, rule.Name, rule.ID, ""); err == nil {
				t.Error("Fail with a cancelled context succeeded")
			}
			if _, err := f.Clear(ctx, rule.Name, rule.ID); err == nil {
				t.Error("Clear with a cancelled context succeeded")
			}
			if f.Degraded() {
				t.Fatal("a cancelled request put the failover in degraded mode")
			}
		})
	}
}
