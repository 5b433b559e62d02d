package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// deliver tries d until t takes it, refuses it, or the attempts run out;
// if ctx ends first, d is dropped.
func (s *Sender) deliver(ctx context.Context, t *target, d delivery) {
	for n := 1; ; n++ {
		if ctx.Err() != nil {
			s.drop(t, d, DropShutdown)
			return
		}
		start := time.Now()
		status, retryAfter, err := s.attempt(ctx, t, d)
		s.metrics.attemptSeconds.Observe(time.Since(start).Seconds())
		switch {
		case err == nil && status/100 == 2:
			s.metrics.deliveries.WithLabelValues("succeeded").Inc()
			return
		case ctx.Err() != nil:
			s.drop(t, d, DropShutdown)
			return
		case err == nil && status != http.StatusTooManyRequests && status/100 != 5:
			// The receiver refused it (4xx, or a redirect not followed):
			// sending it again gets the same answer.
			s.failed()
			s.log.Warn("webhook delivery refused", "url", t.label, "type", d.typ, "id", d.id, "status", status)
			return
		case n >= s.cfg.Attempts:
			s.failed()
			s.log.Warn("webhook delivery failed; giving up", "url", t.label, "type", d.typ, "id", d.id,
				"attempts", n, "status", status, "err", errText(err))
			return
		}
		wait := s.backoff(n)
		if retryAfter > 0 {
			wait = min(retryAfter, s.cfg.MaxBackoff)
		}
		if s.sleep(ctx, wait) != nil {
			s.drop(t, d, DropShutdown)
			return
		}
	}
}

// failed counts a delivery given up: in the metrics as failed, and in
// the shared counter with the drops, since the dashboard's "Webhooks not
// sent" is every delivery that did not arrive; a dead receiver that keeps
// up with its queue drops nothing, and would otherwise show none.
func (s *Sender) failed() {
	s.metrics.deliveries.WithLabelValues("failed").Inc()
	s.pendingDrops.Add(1)
}

// attempt POSTs d to t once, signed now, and returns the answer's status
// and its Retry-After (0 if none or not in seconds), or the error that
// kept it from coming.
func (s *Sender) attempt(ctx context.Context, t *target, d delivery) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(d.body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "XCloak-Webhook/1")
	req.Header.Set(SignatureHeader, Sign(t.secret, s.now(), d.body))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	// A 101 Switching Protocols hands the bare connection over as the
	// body, which the request's context no longer bounds: a receiver that
	// answered one and then went silent would hold this worker, and the
	// shutdown waiting for it, for as long as it liked. Closing the body
	// when the attempt's time is up ends any read.
	defer context.AfterFunc(ctx, func() { resp.Body.Close() })()
	// Read a little of the answer, so that the connection can be reused;
	// the rest is not worth waiting for.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), nil
}

// retryAfter reads a Retry-After in seconds: 0 if none, not positive or
// not in seconds (a date); the longest Duration for more seconds than one
// holds, rather than a product that wraps around to a short wait (the
// caller caps it at MaxBackoff).
func retryAfter(v string) time.Duration {
	secs, err := strconv.ParseInt(v, 10, 64)
	if errors.Is(err, strconv.ErrRange) && secs > 0 {
		return math.MaxInt64
	}
	if err != nil || secs <= 0 {
		return 0
	}
	if secs > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(secs) * time.Second
}

// errText is err for a log line, "" for none. The client's errors
// (*url.Error) quote the whole URL, whose path or query may be the
// receiver's own token: only their cause is kept, the line names the
// URL by its scheme and host already.
func errText(err error) string {
	if err == nil {
		return ""
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within the attempt's time: %v", err)
	}
	return err.Error()
}
