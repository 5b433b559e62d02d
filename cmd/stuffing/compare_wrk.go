package main

import (
	"bufio"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run measured, read from what it printed with
// --latency and a script of cmd/stuffing/wrk that counts statuses.
type wrkResult struct {
	// Requests is the number of answers wrk read in Seconds.
	Requests int64   `json:"requests"`
	Seconds  float64 `json:"seconds"`
	// RPS is wrk's "Requests/sec": Requests over Seconds.
	RPS float64 `json:"requests_per_second"`
	// P50 and P99 are wrk's latency percentiles (--latency), with wrk's
	// two decimals.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// NotOK counts the answers outside 2xx and 3xx.
	NotOK int64 `json:"non_2xx_3xx"`
	// SocketErrors sums wrk's connect, read, write and timeout errors.
	SocketErrors int64 `json:"socket_errors"`
	// Statuses counts answers by the scripts' "status KEY: N" lines: a
	// status code, or a code and a word ("200 allow").
	Statuses map[string]int64 `json:"statuses"`
}

var (
	wrkTotalLine   = regexp.MustCompile(`^(\d+) requests in ([0-9.]+[a-z]+)`)
	wrkRPSLine     = regexp.MustCompile(`^Requests/sec:\s+([0-9.]+)$`)
	wrkPercentLine = regexp.MustCompile(`^(50|75|90|99)%\s+([0-9.]+[a-z]+)$`)
	wrkNotOKLine   = regexp.MustCompile(`^Non-2xx or 3xx responses: (\d+)$`)
	wrkSocketLine  = regexp.MustCompile(`^Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)$`)
	wrkStatusLine  = regexp.MustCompile(`^status (\d{3}(?: [A-Za-z_]+)?): (\d+)`)
)

// parseWrk reads a wrk run's output. It fails when the output lacks the
// figures every comparison needs: the total, the rate and the 99th
// percentile (wrk run without --latency has none).
func parseWrk(out string) (wrkResult, error) {
	r := wrkResult{Statuses: map[string]int64{}}
	var haveTotal, haveRPS, haveP99 bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		var err error
		if m := wrkTotalLine.FindStringSubmatch(line); m != nil {
			r.Requests, err = strconv.ParseInt(m[1], 10, 64)
			if err == nil {
				var d time.Duration
				d, err = parseWrkDuration(m[2])
				r.Seconds = d.Seconds()
			}
			haveTotal = err == nil
		} else if m := wrkRPSLine.FindStringSubmatch(line); m != nil {
			r.RPS, err = strconv.ParseFloat(m[1], 64)
			haveRPS = err == nil
		} else if m := wrkPercentLine.FindStringSubmatch(line); m != nil {
			var d time.Duration
			d, err = parseWrkDuration(m[2])
			switch m[1] {
			case "50":
				r.P50 = d
			case "99":
				r.P99 = d
				haveP99 = err == nil
			}
		} else if m := wrkNotOKLine.FindStringSubmatch(line); m != nil {
			r.NotOK, err = strconv.ParseInt(m[1], 10, 64)
		} else if m := wrkSocketLine.FindStringSubmatch(line); m != nil {
			for _, s := range m[1:] {
				n, perr := strconv.ParseInt(s, 10, 64)
				err = errors.Join(err, perr)
				r.SocketErrors += n
			}
		} else if m := wrkStatusLine.FindStringSubmatch(line); m != nil {
			var n int64
			n, err = strconv.ParseInt(m[2], 10, 64)
			r.Statuses[m[1]] += n
		}
		if err != nil {
			return wrkResult{}, fmt.Errorf("wrk output line %q: %w", line, err)
		}
	}
	switch {
	case !haveTotal:
		return wrkResult{}, errors.New(`wrk output has no "N requests in D" line`)
	case !haveRPS:
		return wrkResult{}, errors.New(`wrk output has no "Requests/sec:" line`)
	case !haveP99:
		return wrkResult{}, errors.New("wrk output has no 99% latency (run with --latency)")
	}
	return r, nil
}

// wrkUnits are the units wrk prints durations in, longest suffix first.
var wrkUnits = []struct {
	suffix string
	unit   time.Duration
}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}}

// parseWrkDuration reads a duration as wrk prints it: "812.00us",
// "3.35ms", "2.10s", "1.00m".
func parseWrkDuration(s string) (time.Duration, error) {
	for _, u := range wrkUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("duration %q: bad number", s)
		}
		return time.Duration(f * float64(u.unit)), nil
	}
	return 0, fmt.Errorf("duration %q: unknown unit", s)
}
