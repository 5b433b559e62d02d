package main

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
)

// wrkHelloOutput is wrk 4.1's output for stuffing hello, with status.lua.
const wrkHelloOutput = `Running 2s test @ http://127.0.0.1:18091
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.35ms    9.86ms  95.14ms   95.45%
    Req/Sec    27.71k     8.69k   51.56k    77.50%
  Latency Distribution
     50%    0.88ms
     75%    2.10ms
     90%    5.45ms
     99%   63.76ms
  112264 requests in 2.10s, 13.06MB read
Requests/sec:  53465.59
Transfer/sec:      6.22MB
status 200: 112264 (53466/s)
`

// wrkDecisionOutput has what a run against a loaded XCloak adds: answers
// outside 2xx and 3xx, socket errors, microseconds and seconds, and
// statuses counted with a word.
const wrkDecisionOutput = `Running 3s test @ http://127.0.0.1:18080
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     8.01ms    4.20ms   1.02s    90.00%
    Req/Sec     4.01k   300.00     4.50k    70.00%
  Latency Distribution
     50%  812.00us
     75%    9.00ms
     90%   12.00ms
     99%    1.02s
  24060 requests in 3.00s, 5.10MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 60
Requests/sec:   8019.97
Transfer/sec:      1.70MB
status 200 allow: 23990 (7997/s)
status 200 challenge: 10 (3/s)
status 429: 60 (20/s)
`

func TestParseWrk(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want wrkResult
	}{
		{"hello", wrkHelloOutput, wrkResult{
			Requests: 112264, Seconds: 2.1, RPS: 53465.59,
			P50: 880 * time.Microsecond, P99: 63760 * time.Microsecond,
			Statuses: map[string]int64{"200": 112264},
		}},
		{"decision, loaded", wrkDecisionOutput, wrkResult{
			Requests: 24060, Seconds: 3, RPS: 8019.97,
			P50: 812 * time.Microsecond, P99: 1020 * time.Millisecond,
			NotOK: 60, SocketErrors: 5,
			Statuses: map[string]int64{"200 allow": 23990, "200 challenge": 10, "429": 60},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseWrk(tt.out)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got.Statuses, tt.want.Statuses) {
				t.Errorf("statuses %v, want %v", got.Statuses, tt.want.Statuses)
			}
			got.Statuses, tt.want.Statuses = nil, nil
			if !closeDuration(got.P50, tt.want.P50) || !closeDuration(got.P99, tt.want.P99) {
				t.Errorf("p50 %v p99 %v, want %v and %v", got.P50, got.P99, tt.want.P50, tt.want.P99)
			}
			got.P50, got.P99, tt.want.P50, tt.want.P99 = 0, 0, 0, 0
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// closeDuration allows the rounding of wrk's two decimals read as a float.
func closeDuration(a, b time.Duration) bool { return (a - b).Abs() < time.Microsecond }

func TestParseWrkRefusesIncompleteOutput(t *testing.T) {
	tests := []struct {
		name, drop, want string
	}{
		{"no total", "  112264 requests in 2.10s, 13.06MB read\n", "requests in"},
		{"no rate", "Requests/sec:  53465.59\n", "Requests/sec"},
		{"run without --latency", "     99%   63.76ms\n", "--latency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := strings.Replace(wrkHelloOutput, tt.drop, "", 1)
			if out == wrkHelloOutput {
				t.Fatalf("fixture has no %q", tt.drop)
			}
			_, err := parseWrk(out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one that mentions %q", err, tt.want)
			}
		})
	}
	if _, err := parseWrk(strings.Replace(wrkHelloOutput, "63.76ms", "63.76parsecs", 1)); err == nil {
		t.Error("a percentile in an unknown unit parsed")
	}
}

func TestParseWrkDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"812.00us", 812 * time.Microsecond},
		{"3.35ms", 3350 * time.Microsecond},
		{"2.10s", 2100 * time.Millisecond},
		{"1.50m", 90 * time.Second},
		{"1.00h", time.Hour},
	}
	for _, tt := range tests {
		got, err := parseWrkDuration(tt.in)
		if err != nil || !closeDuration(got, tt.want) {
			t.Errorf("parseWrkDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "ms", "-1.00ms", "1.00", "1.00d"} {
		if got, err := parseWrkDuration(bad); err == nil {
			t.Errorf("parseWrkDuration(%q) = %v, want an error", bad, got)
		}
	}
}
