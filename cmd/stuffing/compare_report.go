package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// compareRound is one round of a comparison: every contender once, in
// Order, and what each run measured.
type compareRound struct {
	Order   []string             `json:"order"`
	Results map[string]wrkResult `json:"results"`
}

// contenderSummary is one contender over the rounds it completed.
type contenderSummary struct {
	Name string `json:"name"`
	// RPS is requests per second in each round, in round order, and
	// MedianRPS their median.
	RPS       []float64 `json:"requests_per_second"`
	MedianRPS float64   `json:"median_requests_per_second"`
	// Ratios is RPS over the baseline's in the same round; MedianRatio is
	// their median, the comparison's figure: a ratio of medians would pair
	// a quiet round of one with a noisy round of the other.
	Ratios      []float64 `json:"ratios"`
	MedianRatio float64   `json:"median_ratio"`
	// VsBefore is RPS over before/NAME's in the same round, when --before
	// ran it, and MedianVsBefore their median: the after-to-before figure
	// of one run.
	VsBefore       []float64 `json:"vs_before,omitempty"`
	MedianVsBefore float64   `json:"median_vs_before,omitempty"`
	// SameRequest names the bare handler's contender sent this one's
	// requests (sameRequest), when it ran; VsSameRequest is RPS over its
	// in the same round, and MedianVsSameRequest their median.
	SameRequest         string    `json:"same_request,omitempty"`
	VsSameRequest       []float64 `json:"vs_same_request,omitempty"`
	MedianVsSameRequest float64   `json:"median_vs_same_request,omitempty"`
	// SameAnswer, VsSameAnswer and MedianVsSameAnswer are the same for
	// the bare handler's contender that also answers as this one does
	// (sameAnswer): what is left of the ratio is this one's own work.
	SameAnswer         string    `json:"same_answer,omitempty"`
	VsSameAnswer       []float64 `json:"vs_same_answer,omitempty"`
	MedianVsSameAnswer float64   `json:"median_vs_same_answer,omitempty"`
	// P99 is the 99th percentile of latency in each round (milliseconds
	// in JSON); MedianP99 their median.
	P99       []time.Duration `json:"p99_ns"`
	MedianP99 time.Duration   `json:"median_p99_ns"`
	// Statuses sums the answers by status over the rounds; NotOK and
	// SocketErrors sum what wrk counted outside 2xx and 3xx and as socket
	// errors.
	Statuses     map[string]int64 `json:"statuses"`
	NotOK        int64            `json:"non_2xx_3xx"`
	SocketErrors int64            `json:"socket_errors"`
	// Expected is the answer every request should get, a key of
	// Statuses; Unexpected counts the others, which the rates include.
	Expected   string `json:"expected"`
	Unexpected int64  `json:"unexpected"`
}

// summarize turns the rounds into one summary per contender, in the order
// of names, with ratios against baseline and the answers that were not
// the one expected of each. A round missing a contender (an interrupted
// run) counts for none of its ratios.
func summarize(rounds []compareRound, names []string, baseline string, expected map[string]string) []contenderSummary {
	out := make([]contenderSummary, 0, len(names))
	for _, name := range names {
		s := contenderSummary{Name: name, Statuses: map[string]int64{}, Expected: expected[name]}
		for _, r := range rounds {
			res, ok := r.Results[name]
			if !ok {
				continue
			}
			s.RPS = append(s.RPS, res.RPS)
			s.P99 = append(s.P99, res.P99)
			for k, n := range res.Statuses {
				s.Statuses[k] += n
			}
			s.NotOK += res.NotOK
			s.SocketErrors += res.SocketErrors
			if base, ok := r.Results[baseline]; ok && base.RPS > 0 {
				s.Ratios = append(s.Ratios, res.RPS/base.RPS)
			}
			if before, ok := r.Results[beforePrefix+name]; ok && before.RPS > 0 {
				s.VsBefore = append(s.VsBefore, res.RPS/before.RPS)
			}
			kind, _ := strings.CutPrefix(name, beforePrefix)
			twin(r, res, sameRequest[kind], &s.SameRequest, &s.VsSameRequest)
			twin(r, res, sameAnswer[kind], &s.SameAnswer, &s.VsSameAnswer)
		}
		for k, n := range s.Statuses {
			if k != s.Expected {
				s.Unexpected += n
			}
		}
		s.MedianRPS = median(s.RPS)
		s.MedianRatio = median(s.Ratios)
		s.MedianVsBefore = median(s.VsBefore)
		s.MedianVsSameRequest = median(s.VsSameRequest)
		s.MedianVsSameAnswer = median(s.VsSameAnswer)
		s.MedianP99 = medianDuration(s.P99)
		out = append(out, s)
	}
	return out
}

// twin adds to ratios, when round r ran the contender named twin, res's
// rate over twin's, and names it in name.
func twin(r compareRound, res wrkResult, twin string, name *string, ratios *[]float64) {
	if t, ok := r.Results[twin]; ok && t.RPS > 0 {
		*name = twin
		*ratios = append(*ratios, res.RPS/t.RPS)
	}
}

// median is the middle value of xs, or the mean of the two middle ones;
// 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func medianDuration(ds []time.Duration) time.Duration {
	fs := make([]float64, len(ds))
	for i, d := range ds {
		fs[i] = float64(d)
	}
	return time.Duration(median(fs))
}

// compareReport is what "stuffing compare" prints.
type compareReport struct {
	Target      string             `json:"target"`
	Seed        uint64             `json:"seed"`
	Threads     int                `json:"threads"`
	Connections int                `json:"connections"`
	Duration    string             `json:"duration_per_run"`
	Baseline    string             `json:"baseline"`
	CPUs        int                `json:"cpus"`
	LoadBefore  string             `json:"load_average_before"`
	LoadAfter   string             `json:"load_average_after"`
	Rounds      []compareRound     `json:"rounds"`
	Contenders  []contenderSummary `json:"contenders"`
	// Interrupted is set when a signal ended the run before its last round.
	Interrupted bool `json:"interrupted,omitempty"`
}

func (r *compareReport) print(w io.Writer) {
	fmt.Fprintf(w, "target       %s\n", r.Target)
	fmt.Fprintf(w, "wrk          -t%d -c%d -d%s --latency, %d rounds, order shuffled with --seed %d\n",
		r.Threads, r.Connections, r.Duration, len(r.Rounds), r.Seed)
	fmt.Fprintf(w, "load average %s before, %s after (%d CPUs)\n", r.LoadBefore, r.LoadAfter, r.CPUs)
	if r.Interrupted {
		fmt.Fprintln(w, "interrupted: the figures are of the rounds that completed")
	}
	for i, round := range r.Rounds {
		fmt.Fprintf(w, "round %d      %s\n", i+1, strings.Join(round.Order, ", "))
	}
	for _, c := range r.Contenders {
		fmt.Fprintf(w, "\n%s\n", c.Name)
		fmt.Fprintf(w, "  requests/s    %s   median %s\n", joinFloats(c.RPS, thousands), thousands(c.MedianRPS))
		if c.Name != r.Baseline {
			fmt.Fprintf(w, "  vs %-10s %s   median %.2fx\n", r.Baseline, joinFloats(c.Ratios, twoDecimals), c.MedianRatio)
		}
		if len(c.VsSameRequest) > 0 {
			fmt.Fprintf(w, "  vs %-10s %s   median %.2fx\n", c.SameRequest, joinFloats(c.VsSameRequest, twoDecimals), c.MedianVsSameRequest)
		}
		if len(c.VsSameAnswer) > 0 {
			fmt.Fprintf(w, "  vs %-10s %s   median %.2fx\n", c.SameAnswer, joinFloats(c.VsSameAnswer, twoDecimals), c.MedianVsSameAnswer)
		}
		if len(c.VsBefore) > 0 {
			fmt.Fprintf(w, "  vs before     %s   median %.2fx\n", joinFloats(c.VsBefore, twoDecimals), c.MedianVsBefore)
		}
		fmt.Fprintf(w, "  p99           %s   median %s\n", joinDurations(c.P99), millis(c.MedianP99))
		fmt.Fprintf(w, "  answers       %s\n", statusLine(c))
		if c.Unexpected > 0 {
			fmt.Fprintf(w, "  warning       %s answers were not %s, and count in the rates\n", thousands(float64(c.Unexpected)), c.Expected)
		}
	}
}

func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func twoDecimals(f float64) string { return fmt.Sprintf("%.2f", f) }

func millis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
}

func joinFloats(xs []float64, format func(float64) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = format(x)
	}
	return strings.Join(s, " · ")
}

func joinDurations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = strings.TrimSuffix(millis(d), " ms")
	}
	return strings.Join(s, " · ") + " ms"
}

// statusLine lists the answers by status, then wrk's socket errors when
// there were any.
func statusLine(c contenderSummary) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.Statuses)) {
		parts = append(parts, k+": "+thousands(float64(c.Statuses[k])))
	}
	if len(parts) == 0 {
		parts = append(parts, "none counted")
	}
	if c.SocketErrors > 0 {
		parts = append(parts, "socket errors: "+thousands(float64(c.SocketErrors)))
	}
	return strings.Join(parts, ", ")
}
