package ratelimit

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// errRedisRestarted is why a Failover that found its Redis a new server
// process, with no call failing, hands the limits back to it again.
var errRedisRestarted = errors.New("ratelimit: redis is a new server process (restarted, or a new master) since the last look")

// infoer is a client that reads INFO: a go-redis client.
type infoer interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

// WatchRestarts looks, every interval, at which server process answers
// the probes (INFO's run_id), until Close. go-redis dials a restarted
// Redis again by itself, so a restart between two calls fails none of
// them and is no outage to f; but the Redis that came back may have lost
// every lock (no persistence), and a Sentinel's new master may lag behind
// the old. A new process is then taken as an outage just ended: the
// failback puts the lockouts in force back into it, as after any outage.
// Until the next look, at most interval later, the locks Redis lost are
// not in force. A Redis Cluster's probes reach a different node each time,
// whose run_ids tell nothing: it is not watched (its nodes keep their data
// through replicas). Call it once, after Restore is set.
func (f *Failover) WatchRestarts(interval time.Duration) {
	in, ok := f.pinger.(infoer)
	if _, cluster := f.pinger.(*redis.ClusterClient); !ok || cluster || interval <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
			}
			if f.degraded.Load() {
				// The failback to come gives this Redis the locks.
				last = ""
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			id, err := runID(ctx, in)
			cancel()
			if err != nil {
				// Whether Redis is there is the decisions' and the
				// probes' to find.
				continue
			}
			if last != "" && id != last {
				f.log.Warn("redis answers from a new server process, with no call failing; putting the lockouts in force back into it",
					"run_id", id)
				f.trip(errRedisRestarted)
				id = ""
			}
			last = id
		}
	}()
}

// runID reads the run_id of the server in answers: a new one for each
// start of a server process.
func runID(ctx context.Context, in infoer) (string, error) {
	info, err := in.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if id, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(id), nil
		}
	}
	return "", errors.New("ratelimit: INFO server without run_id")
}
