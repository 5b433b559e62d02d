// Command xcloak runs the XCloak login-protection service and its maintenance
// tasks. Run "xcloak --help" for the commands.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/xcloak/xcloak/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal starts a graceful shutdown, a second one kills.
	go func() {
		<-ctx.Done()
		stop()
	}()
	// go-redis' logger is one a process, so it is set here rather than in
	// run, which the tests call many times in one process.
	redisLogLevel.Set(slog.LevelWarn)
	redis.SetLogger(newRedisLogger(os.Stderr))
	err := run(ctx, os.Args, os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err))
}
