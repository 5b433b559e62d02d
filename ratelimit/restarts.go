package ratelimit

import (
	"context"
	"errors"
	"strconv"
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
		var last string
		var lastLook time.Time
		refused := false
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
			}
			if f.degraded.Load() {
				// The failback to come gives this Redis the locks.
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			id, up, err := serverOf(ctx, in)
			cancel()
			now := time.Now()
			var reply redis.Error
			switch {
			case errors.As(err, &reply) && !refused:
				refused = true
				f.log.Warn("redis refuses INFO (a proxy?): a restart between two requests is not noticed", "err", err)
				continue
			case err != nil:
				// Whether Redis is there is the decisions' and the
				// probes' to find.
				continue
			}
			// A new process is one started since the last look: an
			// endpoint that answers from several servers in turn (a
			// balancer over several) shows long-lived ones.
			if last != "" && id != last && up <= now.Sub(lastLook)+time.Second {
				f.log.Warn("redis answers from a new server process, with no call failing; putting the lockouts in force back into it",
					"run_id", id, "uptime_seconds", up.Seconds())
				f.trip(errRedisRestarted)
			}
			last, lastLook = id, now
		}
	}()
}

// serverOf reads the run_id of the server in answers, a new one for each
// start of a server process, and how long that process has run.
func serverOf(ctx context.Context, in infoer) (id string, up time.Duration, err error) {
	info, err := in.Info(ctx, "server").Result()
	if err != nil {
		return "", 0, err
	}
	seconds := -1
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "run_id":
			id = v
		case "uptime_in_seconds":
			seconds, _ = strconv.Atoi(v)
		}
	}
	if id == "" || seconds < 0 {
		return "", 0, errors.New("ratelimit: INFO server without run_id or uptime_in_seconds")
	}
	return id, time.Duration(seconds) * time.Second, nil
}
