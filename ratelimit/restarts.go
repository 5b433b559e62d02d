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
// A new process is one started since the last look, or the replica the
// old master's data went on from (its master_replid2 is the old master's
// replication id): an endpoint that answers from several long-running,
// unrelated servers in turn (a balancer over several) shows neither.
// After an outage, however short, the first process seen is no restart,
// the outage's failback having given the lockouts in force to it, unless
// it is another process than the one the failback found answering just
// before and just after its writes, started about then or later (Redis
// restarted again since). Where the failback's two looks differed, only
// an uptime that says the process surely started after the failback
// ended makes it a restart; uptime is in whole seconds, so a restart
// within a second or so of such a failback stays unnoticed until Redis'
// next outage or restart. Until the next look, at most interval later,
// the locks Redis lost are not in force. A Redis Cluster's probes reach a
// different node each time: it is not watched (its nodes keep their data
// through replicas). Call it once, after Restore is set.
func (f *Failover) WatchRestarts(interval time.Duration) {
	in, ok := f.pinger.(infoer)
	if _, cluster := f.pinger.(*redis.ClusterClient); !ok || cluster || interval <= 0 {
		return
	}
	f.watching.Store(true)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		var last server
		var lastLook time.Time
		var lastOutages uint64
		refused := false
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
			}
			// Read before degraded, which trip sets before counting
			// the outage: an outage that began after this, and
			// ended before degraded is read, shows at the next look.
			outages := f.outages.Load()
			if f.degraded.Load() {
				// The failback to come gives the Redis that answers
				// then the locks: it is the one to know.
				last = server{}
				continue
			}
			asked := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			now, err := serverOf(ctx, in)
			cancel()
			var reply redis.Error
			switch {
			case errors.As(err, &reply) && !refused:
				refused = true
				f.log.Warn("redis answered INFO with an error: a restart between two requests is not noticed while it does", "err", err)
				continue
			case err != nil:
				// Whether Redis is there is the decisions' and the
				// probes' to find.
				continue
			}
			if f.outages.Load() != outages {
				// An outage began while INFO was asked: whether the
				// server that answered is the one its failback gave
				// the locks to is not known. The next look's is.
				continue
			}
			restarted := false
			if outages != lastOutages {
				// An outage began since the last look, shorter than
				// the interval perhaps, with no look while degraded:
				// its failback gave the locks to a server this look
				// may be the first to see. It is the one to know, not
				// a restart, unless it is another process than the
				// failback found answering before and after its writes
				// and started about then or later, or went on from it
				// (Redis restarted again since, and lost them). Where
				// the failback could not tell, only a server that
				// surely started after the failback had given them is
				// one (uptime is in whole seconds, and was read after
				// asked): a bound any looser would take the failback's
				// own server for a restart.
				if back := f.back.Load(); back != nil {
					since := asked.Sub(back.at)
					if back.to.id != "" {
						restarted = now.id != back.to.id && (now.up <= since+time.Second || now.from(back.to))
					} else {
						restarted = now.up+time.Second < since
					}
				}
				last, lastOutages = server{}, outages
			}
			at := time.Now()
			if restarted || last.id != "" && now.id != last.id && (now.up <= at.Sub(lastLook)+time.Second || now.from(last)) {
				f.log.Warn("redis answers from a new server process, with no call failing; putting the lockouts in force back into it",
					"run_id", now.id, "uptime_seconds", now.up.Seconds())
				f.trip(errRedisRestarted)
			}
			last, lastLook = now, at
		}
	}()
}

// server is what INFO says of the server process that answered it.
type server struct {
	id      string        // run_id: a new one for each start of a process
	up      time.Duration // uptime_in_seconds
	replid  string        // master_replid: its replication history's id
	replid2 string        // master_replid2: the id it went on from, if promoted
}

// from reports whether s went on from old's replication history: a
// replica promoted in old's place.
func (s server) from(old server) bool {
	return old.replid != "" && s.replid2 == old.replid && strings.Trim(s.replid2, "0") != ""
}

// serverOf reads what INFO says of the server in answers.
func serverOf(ctx context.Context, in infoer) (server, error) {
	info, err := in.Info(ctx, "server", "replication").Result()
	if err != nil {
		return server{}, err
	}
	s, seconds := server{}, -1
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "run_id":
			s.id = v
		case "uptime_in_seconds":
			seconds, _ = strconv.Atoi(v)
		case "master_replid":
			s.replid = v
		case "master_replid2":
			s.replid2 = v
		}
	}
	if s.id == "" || seconds < 0 {
		return server{}, errors.New("ratelimit: INFO server without run_id or uptime_in_seconds")
	}
	s.up = time.Duration(seconds) * time.Second
	return s, nil
}
