package main

import (
	"flag"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// recordingRegisterer passes registrations on and keeps the collectors, so
// that their descriptions can be read: a metric vector with no child yet
// (xcloak_rejected_total before any rejection) is absent from a gathering.
type recordingRegisterer struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var descName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

// exportedMetrics is every series name XCloak's /metrics can show, from the
// registry built as serve builds it: metric names, and a histogram's or
// summary's _bucket, _sum and _count.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	vars := storeSettings(t)
	vars["XCLOAK_PUBLIC_URL"] = "https://login.example.com" // serve's default needs a listener
	cfg, err := loadConfig(fs, nil, env(vars), io.Discard, io.Discard, forServe)
	if err != nil {
		t.Fatal(err)
	}
	registry := newRegistry()
	rec := &recordingRegisterer{Registerer: registry}
	b, err := openBackend(t.Context(), cfg, slog.New(slog.DiscardHandler), rec, true)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	names := make(map[string]bool)
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		name := f.GetName()
		names[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"] = true
			fallthrough
		case dto.MetricType_SUMMARY:
			names[name+"_sum"] = true
			names[name+"_count"] = true
		}
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		for _, c := range rec.collectors {
			c.Describe(descs)
		}
		close(descs)
	}()
	for d := range descs {
		m := descName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		names[m[1]] = true
	}
	for _, want := range []string{"xcloak_signin_attempts_total", "xcloak_rejected_total", "xcloak_attack_mode", "go_goroutines"} {
		if !names[want] {
			t.Fatalf("the registry lacks %s; it has %v", want, slices.Sorted(maps.Keys(names)))
		}
	}
	return names
}

// TestExportedMetrics lists what the registry exports, for whoever writes
// an alert or a panel: go test -run ExportedMetrics -v ./cmd/xcloak/
func TestExportedMetrics(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(exportedMetrics(t))) {
		if strings.HasPrefix(name, "xcloak_") {
			t.Log(name)
		}
	}
}

var (
	// promqlStrings are string literals, whose content is no name.
	promqlStrings = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	// promqlIgnored are label matchers, range and subquery selectors,
	// grouping label lists and dashboard variables.
	promqlIgnored = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)|\$\{[^}]*\}|\$[A-Za-z0-9_]+`)
	// promqlTokens are numbers and durations (which may hold letters),
	// names, and any other character.
	promqlTokens   = regexp.MustCompile(`[0-9][0-9A-Za-z_.]*|[A-Za-z_:][A-Za-z0-9_:]*|\S`)
	promqlKeywords = map[string]bool{
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"and": true, "or": true, "unless": true, "offset": true, "bool": true, "inf": true, "nan": true,
		"Inf": true, "NaN": true, "atan2": true,
	}
)

// promqlMetricNames returns the metric names a PromQL expression selects:
// every name that is not a keyword, a function or an aggregation (a name
// followed by an opening parenthesis), a label, or a number.
func promqlMetricNames(expr string) []string {
	expr = promqlStrings.ReplaceAllString(expr, `""`)
	expr = promqlIgnored.ReplaceAllString(expr, " ")
	tokens := promqlTokens.FindAllString(expr, -1)
	var names []string
	for i, tok := range tokens {
		c := tok[0]
		if c >= '0' && c <= '9' || !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			continue
		}
		if promqlKeywords[tok] || i+1 < len(tokens) && tokens[i+1] == "(" {
			continue
		}
		if !slices.Contains(names, tok) {
			names = append(names, tok)
		}
	}
	return names
}

func TestPromQLMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`xcloak_redis_degraded == 1`, []string{"xcloak_redis_degraded"}},
		{`sum by (instance, reason) (increase(xcloak_reset_mails_dropped_total{reason!="domain_limit"}[10m])) > 0`,
			[]string{"xcloak_reset_mails_dropped_total"}},
		{`histogram_quantile(0.99, sum without (instance) (rate(xcloak_limiter_decision_seconds_bucket[$__rate_interval])))`,
			[]string{"xcloak_limiter_decision_seconds_bucket"}},
		{`sum(rate(a_total[5m])) > 5 * (sum(rate(a_total[1h] offset 5m)) or vector(0)) and on() b > bool 1e3`,
			[]string{"a_total", "b"}},
		{`max(xcloak_attack_mode{job=~"x.*", instance="a{b}"}) or on (job) up{job="it's"}`, []string{"xcloak_attack_mode", "up"}},
		{`rate(x[5m:30s]) / ignoring(reason) group_left y`, []string{"x", "y"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)")`, []string{"m"}},
	}
	for _, tt := range tests {
		if got := promqlMetricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("promqlMetricNames(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

// checkMetricNames fails the test for every name expr selects that the
// registry does not export, and when expr selects none.
func checkMetricNames(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	names := promqlMetricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: %q selects no metric", where, expr)
	}
	for _, name := range names {
		if !exported[name] {
			t.Errorf("%s: %s is no metric XCloak exports (expression %q)", where, name, expr)
		}
	}
}
