package main

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.55, 0.66, 0.62, 0.69, 0.2}, 0.62},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.in)
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("median reordered its input: %v, was %v", tt.in, in)
		}
	}
}

// TestSummarizeRatiosAreRoundByRound: the ratio is the median of each
// round's ratio, not the ratio of the medians, and a round a contender
// missed counts for nothing.
func TestSummarizeRatiosAreRoundByRound(t *testing.T) {
	res := func(rps float64, p99ms int, statuses map[string]int64) wrkResult {
		return wrkResult{RPS: rps, P99: time.Duration(p99ms) * time.Millisecond, Statuses: statuses}
	}
	ok := func(n int64) map[string]int64 { return map[string]int64{"200": n} }
	rounds := []compareRound{
		{Order: []string{"hello", "fa"}, Results: map[string]wrkResult{
			"hello": res(100, 10, ok(1000)), "fa": res(60, 20, ok(600))}},
		// A loaded round: both slow, the ratio is what counts.
		{Order: []string{"fa", "hello"}, Results: map[string]wrkResult{
			"hello": res(20, 90, ok(200)), "fa": res(18, 95, map[string]int64{"200": 170, "302": 10})}},
		{Order: []string{"hello", "fa"}, Results: map[string]wrkResult{
			"hello": res(80, 12, ok(800)), "fa": res(40, 30, ok(400))}},
		// Interrupted before fa ran.
		{Order: []string{"hello"}, Results: map[string]wrkResult{"hello": res(90, 11, ok(900))}},
	}
	got := summarize(rounds, []string{"hello", "fa"}, "hello", map[string]string{"hello": "200", "fa": "200"})
	if len(got) != 2 || got[0].Name != "hello" || got[1].Name != "fa" {
		t.Fatalf("summaries %+v, want hello then fa", got)
	}
	hello, fa := got[0], got[1]
	if want := []float64{1, 1, 1, 1}; !slices.Equal(hello.Ratios, want) || hello.MedianRatio != 1 {
		t.Errorf("hello's ratios %v (median %v), want %v", hello.Ratios, hello.MedianRatio, want)
	}
	if hello.MedianRPS != 85 {
		t.Errorf("hello's median %v, want 85", hello.MedianRPS)
	}
	if want := []float64{0.6, 0.9, 0.5}; !slices.Equal(fa.Ratios, want) {
		t.Errorf("fa's ratios %v, want %v", fa.Ratios, want)
	}
	// The ratio of the medians would be 40/85 = 0.47.
	if fa.MedianRatio != 0.6 {
		t.Errorf("fa's median ratio %v, want 0.6", fa.MedianRatio)
	}
	if fa.MedianRPS != 40 || fa.MedianP99 != 30*time.Millisecond {
		t.Errorf("fa's median %v and p99 %v, want 40 and 30ms", fa.MedianRPS, fa.MedianP99)
	}
	if want := map[string]int64{"200": 1170, "302": 10}; !maps.Equal(fa.Statuses, want) {
		t.Errorf("fa's answers %v, want %v", fa.Statuses, want)
	}
	if hello.Unexpected != 0 || fa.Unexpected != 10 {
		t.Errorf("unexpected answers: hello %d, fa %d; want 0 and the 10 302s", hello.Unexpected, fa.Unexpected)
	}
}

func TestReportPrint(t *testing.T) {
	r := compareReport{
		Target: "http://127.0.0.1:18080", Seed: 7, Threads: 2, Connections: 64, Duration: "3s",
		Baseline: "hello", CPUs: 2, LoadBefore: "0.50 0.40 0.30", LoadAfter: "1.90 0.80 0.40",
		Rounds: []compareRound{{Order: []string{"forward-auth", "hello"}}},
		Contenders: []contenderSummary{
			{Name: "hello", RPS: []float64{53465.59}, MedianRPS: 53465.59, Ratios: []float64{1}, MedianRatio: 1,
				P99: []time.Duration{63760 * time.Microsecond}, MedianP99: 63760 * time.Microsecond,
				Statuses: map[string]int64{"200": 112264}},
			{Name: "forward-auth", RPS: []float64{30000}, MedianRPS: 30000, Ratios: []float64{0.5611}, MedianRatio: 0.5611,
				P99: []time.Duration{4 * time.Millisecond}, MedianP99: 4 * time.Millisecond,
				Statuses: map[string]int64{"200": 90000, "302": 3}, SocketErrors: 2, Expected: "200", Unexpected: 3},
		},
	}
	var b bytes.Buffer
	r.print(&b)
	for _, want := range []string{
		"--seed 7",
		"load average 0.50 0.40 0.30 before, 1.90 0.80 0.40 after (2 CPUs)",
		"round 1      forward-auth, hello",
		"requests/s    53,466   median 53,466",
		"vs hello      0.56   median 0.56x",
		"p99           63.76 ms   median 63.76 ms",
		"answers       200: 90,000, 302: 3, socket errors: 2",
		"warning       3 answers were not 200, and count in the rates",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Count(b.String(), "warning") != 1 {
		t.Errorf("a warning for a contender whose every answer was expected:\n%s", b.String())
	}
	if strings.Count(b.String(), "vs hello") != 1 {
		t.Errorf("the baseline is compared with itself:\n%s", b.String())
	}
}

// With a before/NAME beside NAME, each round's NAME is divided by its
// before/NAME of the same round, and the median of those is the figure.
func TestSummarizeVsBefore(t *testing.T) {
	r := func(rps float64) wrkResult { return wrkResult{RPS: rps, Statuses: map[string]int64{"429": 1}} }
	rounds := []compareRound{
		{Results: map[string]wrkResult{"hello": r(100), "rej": r(60), "before/rej": r(50)}},
		// A loaded round: both slow alike.
		{Results: map[string]wrkResult{"hello": r(20), "rej": r(11), "before/rej": r(10)}},
		{Results: map[string]wrkResult{"hello": r(80), "rej": r(40), "before/rej": r(50)}},
		// Interrupted before before/rej ran.
		{Results: map[string]wrkResult{"hello": r(90), "rej": r(45)}},
	}
	got := summarize(rounds, []string{"hello", "rej", "before/rej"}, "hello", map[string]string{"rej": "429", "before/rej": "429"})
	rej, before := got[1], got[2]
	if want := []float64{1.2, 1.1, 0.8}; !slices.EqualFunc(rej.VsBefore, want, func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }) {
		t.Errorf("rej vs before %v, want %v", rej.VsBefore, want)
	}
	if rej.MedianVsBefore < 1.1-1e-9 || rej.MedianVsBefore > 1.1+1e-9 {
		t.Errorf("rej's median vs before %v, want 1.1", rej.MedianVsBefore)
	}
	if len(before.VsBefore) != 0 || got[0].VsBefore != nil {
		t.Errorf("before/rej and hello have no before of their own; got %v and %v", before.VsBefore, got[0].VsBefore)
	}
}

// A contender with a bare handler's twin sent the same requests
// (rejections and hello-post) is also divided, round by round, by its
// twin, and by the twin that also answers as it does (hello-429);
// before/NAME by the same twins; the others have none.
func TestSummarizeVsSameRequest(t *testing.T) {
	r := func(rps float64) wrkResult { return wrkResult{RPS: rps, Statuses: map[string]int64{"200": 1}} }
	rounds := []compareRound{
		{Results: map[string]wrkResult{"hello": r(100), "hello-post": r(80), "hello-429": r(75), "rejections": r(60), "before/rejections": r(40), "forward-auth": r(50)}},
		{Results: map[string]wrkResult{"hello": r(100), "hello-post": r(90), "hello-429": r(90), "rejections": r(81), "before/rejections": r(45), "forward-auth": r(50)}},
		// Interrupted before hello-post ran.
		{Results: map[string]wrkResult{"hello": r(100), "rejections": r(10)}},
	}
	names := []string{"hello", "hello-post", "rejections", "before/rejections", "forward-auth", "hello-429"}
	got := summarize(rounds, names, "hello", map[string]string{})
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	rej, before := got[2], got[3]
	if want := []float64{0.75, 0.9}; rej.SameRequest != "hello-post" || !slices.EqualFunc(rej.VsSameRequest, want, near) || !near(rej.MedianVsSameRequest, 0.825) {
		t.Errorf("rejections vs %q %v, median %v; want hello-post %v, median 0.825", rej.SameRequest, rej.VsSameRequest, rej.MedianVsSameRequest, want)
	}
	if want := []float64{0.5, 0.5}; before.SameRequest != "hello-post" || !slices.EqualFunc(before.VsSameRequest, want, near) {
		t.Errorf("before/rejections vs %q %v, want hello-post %v", before.SameRequest, before.VsSameRequest, want)
	}
	if want := []float64{0.8, 0.9}; rej.SameAnswer != "hello-429" || !slices.EqualFunc(rej.VsSameAnswer, want, near) || !near(rej.MedianVsSameAnswer, 0.85) {
		t.Errorf("rejections vs %q %v, median %v; want hello-429 %v, median 0.85", rej.SameAnswer, rej.VsSameAnswer, rej.MedianVsSameAnswer, want)
	}
	if want := []float64{40.0 / 75, 0.5}; before.SameAnswer != "hello-429" || !slices.EqualFunc(before.VsSameAnswer, want, near) {
		t.Errorf("before/rejections vs %q %v, want hello-429 %v", before.SameAnswer, before.VsSameAnswer, want)
	}
	for _, c := range []contenderSummary{got[0], got[1], got[4], got[5]} {
		if c.SameRequest != "" || c.VsSameRequest != nil || c.SameAnswer != "" || c.VsSameAnswer != nil {
			t.Errorf("%s compared with %q %v and %q %v; it has no twin", c.Name, c.SameRequest, c.VsSameRequest, c.SameAnswer, c.VsSameAnswer)
		}
	}
	var b bytes.Buffer
	(&compareReport{Baseline: "hello", Contenders: got}).print(&b)
	if !strings.Contains(b.String(), "vs hello-post 0.75 · 0.90   median 0.82x") || !strings.Contains(b.String(), "vs hello-429  0.80 · 0.90   median 0.85x") {
		t.Errorf("report lacks the ratios to hello-post and hello-429:\n%s", b.String())
	}
}
